// The plugin's logic, on kwop's helper module (src/kwop.js, types in src/kwop.d.ts): plain
// JavaScript, so `./test.sh` runs it in Node with a fake cache (test/plugin.test.mjs).
// src/component.js connects it to the host (the WIT world kwop:reconciler@0.2).
//
// A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap `<name>-info` that describes it
// (reconcile); when the Foo is deleted the ConfigMap is deleted first (finalize); a Foo without
// spec.deploymentName is refused before it is stored (validate, when the host serves admission).

import { Finalize, Outcome, allow, deny, gvk, normal, permanent, violation, warning } from './kwop.js';

export const FOO = gvk('samplecontroller.k8s.io', 'v1alpha1', 'Foo');
export const CONFIGMAP = gvk('', 'v1', 'ConfigMap');

export const info = {
  name: '{{name}}',
  version: '0.1.0',
  primary: FOO,
  owns: [CONFIGMAP], // what it creates: the host lets it write only these
  reads: [], // kinds it only reads through the cache
  // finalizes / validates: true because this module exports finalize / validate (set them to
  // false here to keep the functions but have the host never call them).
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

// The Foo is being deleted (its deletionTimestamp is set): the host calls finalize instead of
// reconcile, as long as the Foo carries the finalizer kwop.dev/{{name}} (the host adds it before
// it writes anything for a Foo). Finalize.done() lets the Foo go once the deletions are made;
// Finalize.notYet() keeps it and is called again (.requeueAfter(ms), default 5 s). A thrown error
// is a FinalizeFailed Warning on the Foo, retried with backoff: the deletion waits.
export function finalize(foo, ctx) {
  // The owner reference would let Kubernetes' garbage collector delete it too; a plugin owning
  // objects in other namespaces (owns: [acrossNamespaces(gvk)]) must delete them here.
  const name = `${foo.metadata.name}-info`;
  ctx.log.info(`deleting ConfigMap ${name} before Foo ${foo.metadata.name} goes`);
  return Finalize.done().delete(CONFIGMAP, undefined, name).event(normal('CleanedUp', `ConfigMap ${name} deleted`));
}

// Admission: the API server asks before it stores a Foo (CREATE, UPDATE). Return allow(...warnings)
// (kubectl prints each as `Warning: ...`), deny(violation(field, message), ...) to refuse, or
// nothing to allow. A thrown error is not a refusal: the call fails and the webhook's
// failurePolicy decides (Fail refuses with the error's message, Ignore admits).
export function validate({ object, oldObject }, ctx) {
  const spec = object.spec ?? {};
  if (!spec.deploymentName) {
    return deny(violation('spec.deploymentName', 'is required: the Deployment this Foo describes'));
  }
  if (oldObject && oldObject.spec?.deploymentName !== spec.deploymentName) {
    return allow(`spec.deploymentName changes from ${oldObject.spec?.deploymentName} to ${spec.deploymentName}`);
  }
  return allow();
}
