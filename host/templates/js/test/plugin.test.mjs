// Native unit tests of src/plugin.js with a fake cache and log: `npm test` (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { reconcile, info, CONFIGMAP } from '../src/plugin.js';

// A fake host: `objects` is what the cache holds; every log line is kept.
function fakeHost(objects = []) {
  const logs = [];
  return {
    logs,
    get: (gvk, ns, name) =>
      objects.find(
        (o) => o.kind === gvk.kind && o.metadata.namespace === ns && o.metadata.name === name,
      ),
    log: (level, message) => logs.push(`${level}: ${message}`),
  };
}

const foo = (spec) => ({
  apiVersion: 'samplecontroller.k8s.io/v1alpha1',
  kind: 'Foo',
  metadata: { name: 'example', namespace: 'default', uid: 'u1' },
  spec,
});

test('declares what it touches', () => {
  assert.deepEqual(info.owns, [CONFIGMAP]);
});

test('a Foo gets a ConfigMap describing it', () => {
  const host = fakeHost();
  const out = reconcile(foo({ deploymentName: 'web', replicas: 3 }), host);
  assert.deepEqual(out.apply[0].data, { foo: 'example', deploymentName: 'web', replicas: '3' });
  assert.equal(out.apply[0].metadata.name, 'example-info');
  assert.equal(out.events[0].reason, 'Synced');
  assert.deepEqual(host.logs, ['debug: creating ConfigMap example-info']);
});

test('an existing ConfigMap is updated, not created', () => {
  const cm = { kind: 'ConfigMap', metadata: { name: 'example-info', namespace: 'default' } };
  const host = fakeHost([cm]);
  reconcile(foo({ deploymentName: 'web' }), host);
  assert.deepEqual(host.logs, ['debug: updating ConfigMap example-info']);
});

test('a Foo without deploymentName is a failure, not retried', () => {
  assert.throws(() => reconcile(foo({}), fakeHost()), (f) => f.retry === false && f.events[0].reason === 'InvalidSpec');
});
