// The reconcile logic: plain JavaScript, no WIT types, so `npm test` runs it in Node with a fake
// cache and log (test/plugin.test.mjs). src/component.js connects it to the host.
//
// A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap `<name>-info` that describes it.

export const FOO = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', kind: 'Foo' };
export const CONFIGMAP = { group: '', version: 'v1', kind: 'ConfigMap' };

export const info = {
  name: '{{name}}',
  version: '0.1.0',
  primary: FOO,
  owns: [CONFIGMAP], // what it creates: the host lets it write only these
  reads: [], // kinds it only reads through the cache
};

// foo: the primary object (parsed JSON). host: { get(gvk, namespace, name) -> object | undefined,
// log(level, message) }. Returns { apply: [objects], status: object | undefined, events: [...] }.
export function reconcile(foo, host) {
  const name = `${foo.metadata.name}-info`;
  const spec = foo.spec ?? {};
  if (!spec.deploymentName) {
    // A failure: nothing is written; retry: false waits until the Foo changes.
    throw failure('spec.deploymentName is required', false);
  }
  const existing = host.get(CONFIGMAP, foo.metadata.namespace, name);
  host.log('debug', existing ? `updating ConfigMap ${name}` : `creating ConfigMap ${name}`);
  const configMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name }, // namespace: the Foo's; the owner reference is set by the host
    data: {
      foo: foo.metadata.name,
      deploymentName: spec.deploymentName,
      replicas: String(spec.replicas ?? 1), // ConfigMap data values are strings
    },
  };
  return {
    apply: [configMap],
    status: undefined, // e.g. { availableReplicas: 1 }: the value of `status`, not { status: ... }
    events: [{ severity: 'normal', reason: 'Synced', message: `ConfigMap ${name} is up to date` }],
  };
}

// A reconcile that could not decide, with a Warning event saying why.
export function failure(message, retry) {
  return { message, retry, events: [{ severity: 'warning', reason: 'InvalidSpec', message }] };
}
