// Native tests of the TypeScript config-sync (node --test, after ./build.sh compiled it into
// gen/plugin/src): reconcile and finalize through kwop.js's plugin(), over a fake cache, as the
// host calls them. The fixtures (../fixtures) check the same through the component.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fakeCache, fakeRequest, gvk } from '../gen/plugin/src/kwop.js';
import { cleanup, sync } from '../gen/plugin/src/sync.js';
import { toQuery } from '../gen/plugin/src/selector.js';

const cs = (spec, status) => ({ apiVersion: 'examples.kwop.dev/v1alpha1', kind: 'ConfigSync', metadata: { name: 'app', generation: 3 }, spec, status });
const ns = (name, labels = {}, phase = 'Active') => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels }, status: { phase } });
const cm = (namespace, data, annotations) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'app', namespace, annotations }, data });
const spec = { source: { kind: 'ConfigMap', namespace: 'platform', name: 'app' }, namespaceSelector: { matchLabels: { sync: 'yes' } } };

function world(objects, owned = []) {
  const cache = fakeCache(objects);
  return {
    source: (kind, n, name) => { const t = cache.get(gvk('', 'v1', kind), n, name); return t && JSON.parse(t); },
    namespaces: (sel) => cache.query(gvk('', 'v1', 'Namespace'), undefined, sel || undefined).map((t) => JSON.parse(t)),
    exists: (kind, n, name) => cache.get(gvk('', 'v1', kind), n, name) !== undefined,
    owned,
  };
}

test('copies into selected namespaces, never its own, a terminating one or over a foreign object', () => {
  const w = world([cm('platform', { k: 'v' }), ns('platform', { sync: 'yes' }), ns('a', { sync: 'yes' }), ns('b', { sync: 'yes' }),
    ns('gone', { sync: 'yes' }, 'Terminating'), ns('other'), cm('b', { k: 'theirs' })]);
  const d = sync(cs(spec), w, '2026-01-01T00:00:00Z');
  assert.deepEqual(d.apply.map((o) => o.metadata.namespace), ['a']);
  assert.deepEqual(d.apply[0].data, { k: 'v' });
  assert.deepEqual(d.status.conflicts, ['b']);
  assert.equal(d.status.conditions[0].reason, 'Conflict');
  assert.equal(d.status.conditions[0].observedGeneration, 3);
  assert.equal(d.events[0].reason, 'ErrResourceExists');
});

test('a missing source or an invalid selector keeps every copy', () => {
  const owned = [{ kind: 'ConfigMap', namespace: 'a', name: 'app' }];
  const missing = sync(cs(spec, { synced: 1 }), world([ns('a', { sync: 'yes' })], owned), '2026-01-01T00:00:00Z');
  assert.deepEqual([missing.apply, missing.delete, missing.status.synced], [[], [], 1]);
  assert.equal(missing.status.conditions[0].reason, 'SourceNotFound');
  const bad = { ...spec, namespaceSelector: { matchExpressions: [{ key: 'x', operator: 'Near' }] } };
  const invalid = sync(cs(bad), world([cm('platform', {})], owned), '2026-01-01T00:00:00Z');
  assert.equal(invalid.status.conditions[0].reason, 'InvalidSpec');
  assert.match(invalid.events[0].message, /matchExpressions\[0\]\.operator: "Near" is not a valid operator/);
});

test('a copy no longer selected is deleted; finalize deletes them all', () => {
  const owned = [{ kind: 'ConfigMap', namespace: 'a', name: 'app' }, { kind: 'Secret', namespace: 'c', name: 'old' }];
  const d = sync(cs(spec), world([cm('platform', {}), ns('a', { sync: 'yes' })], owned), '2026-01-01T00:00:00Z');
  assert.deepEqual(d.delete, [{ kind: 'Secret', namespace: 'c', name: 'old' }]);
  const c = cleanup(owned);
  assert.equal(c.delete.length, 2);
  assert.equal(c.event.message, 'deleted 2 copies');
});

test('the selector string: labels sorted first, then expressions; invalid keys named', () => {
  assert.equal(toQuery({ matchLabels: { team: 'a', env: 'prod' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['web', 'db', 'web'] }, { key: 'legacy', operator: 'DoesNotExist' }] }),
    'env=prod,team=a,tier in (db,web),!legacy');
  assert.throws(() => toQuery({ matchLabels: { 'Bad Key': 'x' } }), /invalid label key "Bad Key"/);
});

test('the component entry reads the request: now, owned copies (fakeRequest)', () => {
  // kwop.js's request helper, as the host sends it to finalize.
  const r = fakeRequest(cs(spec), { owned: [cm('a', {})] });
  assert.equal(typeof r.now.seconds, 'bigint');
  assert.equal(JSON.parse(r.owned[0]).metadata.namespace, 'a');
});
