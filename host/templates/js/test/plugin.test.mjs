// Native unit tests of src/plugin.js, called as the component calls it (kwop.js's plugin()) over
// a fake cache that answers as the host does: `./test.sh` (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeCache, plugin } from '../src/kwop.js';
import * as definition from '../src/plugin.js';

const foo = (spec) => ({
  apiVersion: 'samplecontroller.k8s.io/v1alpha1',
  kind: 'Foo',
  metadata: { name: 'example', namespace: 'default', uid: 'u1' },
  spec,
});

// One reconcile: { out } or { failure }, and the log lines.
function run(primary, objects = []) {
  const logs = [];
  const log = { log: (level, message) => logs.push(`${level}: ${message}`) };
  const p = plugin(definition, { cache: fakeCache(objects, primary.metadata.namespace), log });
  try {
    return { out: p.reconcile({ primary: JSON.stringify(primary), owned: [] }), logs };
  } catch (failure) {
    return { failure, logs };
  }
}

test('declares what it touches', () => {
  const info = plugin(definition, { cache: fakeCache([]), log: { log() {} } }).info();
  assert.deepEqual(info.owns, [definition.CONFIGMAP]);
});

test('a Foo gets a ConfigMap describing it', () => {
  const { out, logs } = run(foo({ deploymentName: 'web', replicas: 3 }));
  const cm = JSON.parse(out.apply[0]);
  assert.equal(cm.metadata.name, 'example-info');
  assert.deepEqual(cm.data, { foo: 'example', deploymentName: 'web', replicas: '3' });
  assert.equal(out.events[0].reason, 'Synced');
  assert.deepEqual(logs, ['debug: creating ConfigMap example-info']);
});

test('an existing ConfigMap is updated, not created', () => {
  const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'example-info', namespace: 'default' } };
  const { logs } = run(foo({ deploymentName: 'web' }), [cm]);
  assert.deepEqual(logs, ['debug: updating ConfigMap example-info']);
});

test('a Foo without deploymentName is a failure, not retried', () => {
  const { failure } = run(foo({}));
  assert.equal(failure.retry, false);
  assert.equal(failure.events[0].reason, 'InvalidSpec');
});
