// Native unit tests of src/plugin.js, called as the component calls it (kwop.js's plugin()) over
// a fake cache that answers as the host does: `./test.sh` (node --test). reconcile, finalize and
// validate each get the WIT request the host would send (fakeRequest, fakeAdmission).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeAdmission, fakeCache, fakeRequest, plugin } from '../src/kwop.js';
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
    return { out: p.reconcile(fakeRequest(primary)), logs };
  } catch (failure) {
    return { failure, logs };
  }
}

const quiet = { cache: fakeCache([]), log: { log() {} } };

test('declares what it touches, that it finalizes and validates', () => {
  const info = plugin(definition, quiet).info();
  assert.deepEqual(info.owns, [{ kind: definition.CONFIGMAP, acrossNamespaces: false }]);
  assert.deepEqual([info.finalizes, info.validates], [true, true]);
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

test('a deleted Foo: finalize deletes its ConfigMap, then lets it go', () => {
  const deleting = { ...foo({ deploymentName: 'web' }), metadata: { name: 'example', namespace: 'default', deletionTimestamp: '2026-01-01T00:00:00Z' } };
  const out = plugin(definition, quiet).finalize(fakeRequest(deleting));
  assert.equal(out.done, true);
  assert.deepEqual(out.delete, [{ gvk: definition.CONFIGMAP, namespace: undefined, name: 'example-info' }]);
  assert.equal(out.events[0].reason, 'CleanedUp');
});

test('validate refuses a Foo without deploymentName and warns when it changes', () => {
  const p = plugin(definition, quiet);
  assert.deepEqual(p.validate(fakeAdmission(foo({ deploymentName: 'web' }))), []);
  let refused;
  try {
    p.validate(fakeAdmission(foo({})));
  } catch (violations) {
    refused = violations;
  }
  assert.deepEqual(refused, [{ field: 'spec.deploymentName', message: 'is required: the Deployment this Foo describes' }]);
  const warnings = p.validate(fakeAdmission(foo({ deploymentName: 'new' }), { oldObject: foo({ deploymentName: 'old' }) }));
  assert.deepEqual(warnings, ['spec.deploymentName changes from old to new']);
});
