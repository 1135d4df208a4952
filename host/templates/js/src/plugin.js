// The reconcile logic, on kwop's helper module (src/kwop.js, types in src/kwop.d.ts): plain
// JavaScript, so `./test.sh` runs it in Node with a fake cache (test/plugin.test.mjs).
// src/component.js connects it to the host.
//
// A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap `<name>-info` that describes it.

import { Outcome, gvk, normal, permanent, warning } from './kwop.js';

export const FOO = gvk('samplecontroller.k8s.io', 'v1alpha1', 'Foo');
export const CONFIGMAP = gvk('', 'v1', 'ConfigMap');

export const info = {
  name: '{{name}}',
  version: '0.1.0',
  primary: FOO,
  owns: [CONFIGMAP], // what it creates: the host lets it write only these
  reads: [], // kinds it only reads through the cache
};

// foo: the primary object (parsed JSON). ctx: get(gvk, namespace, name) and query(...) read the
// host's cache (namespace undefined: the Foo's), owned(gvk), log.debug/info/warn/error(...).
// Returns an Outcome; throw permanent(...) or retryable(...) when it cannot decide.
export function reconcile(foo, ctx) {
  const name = `${foo.metadata.name}-info`;
  const spec = foo.spec ?? {};
  if (!spec.deploymentName) {
    // A failure: nothing is written; permanent (no retry) waits until the Foo changes.
    const message = 'spec.deploymentName is required';
    throw permanent(message).event(warning('InvalidSpec', message));
  }
  const existing = ctx.get(CONFIGMAP, undefined, name);
  ctx.log.debug(existing ? `updating ConfigMap ${name}` : `creating ConfigMap ${name}`);
  return new Outcome()
    .apply({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name }, // namespace: the Foo's; the owner reference is set by the host
      data: {
        foo: foo.metadata.name,
        deploymentName: spec.deploymentName,
        replicas: String(spec.replicas ?? 1), // ConfigMap data values are strings
      },
    })
    // .status({ availableReplicas: 1 }) would be the value of `status`, not { status: ... }
    .event(normal('Synced', `ConfigMap ${name} is up to date`));
}
