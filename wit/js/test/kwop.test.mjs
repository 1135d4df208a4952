// Unit tests of kwop.js (node --test wit/js/test), and the TypeScript check of kwop.d.ts and the
// generated types/ (test/typecheck.ts, with guest-foo/js's tsc, when it is installed).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Failure, Outcome, fakeCache, findStatusCondition, gvk, normal, permanent, plugin, retryable,
  setStatusCondition, warning,
} from '../kwop.js';

const cm = gvk('', 'v1', 'ConfigMap');
const primary = JSON.stringify({
  apiVersion: 'example.com/v1', kind: 'Widget',
  metadata: { name: 'w', namespace: 'ns', uid: 'u1' }, spec: { size: 2 },
});
const lines = [];
const log = { log: (level, message) => lines.push([level, message]) };
const info = { name: 'widgets', version: '1', primary: gvk('example.com', 'v1', 'Widget'), owns: [cm] };
const run = (reconcile, objects = [], owned = []) =>
  plugin({ info, reconcile }, { cache: fakeCache(objects, 'ns'), log }).reconcile({ primary, owned });
const failureOf = (f) => {
  try {
    f();
  } catch (e) {
    return e;
  }
  assert.fail('did not throw');
};

test('info fills in the lists the WIT wants', () => {
  assert.deepEqual(plugin({ info: { name: 'a', version: '1', primary: cm } }, { cache: fakeCache([]), log }).info(),
    { name: 'a', version: '1', primary: cm, owns: [], reads: [] });
});

test('an outcome crosses as the WIT records: JSON text, BigInt milliseconds', () => {
  const out = run((w, ctx) => {
    assert.equal(w.spec.size, 2);
    ctx.recorder.event('Normal', 'Sized', 'size 2');
    return new Outcome()
      .applyAs(cm, { metadata: { name: 'w-size' }, data: { size: '2' } })
      .delete(cm, '', 'old')
      .status({ size: 2 })
      .event(warning('Odd', 'odd'))
      .requeueAfter(1.5);
  });
  assert.deepEqual(out, {
    apply: ['{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w-size"},"data":{"size":"2"}}'],
    delete: [{ gvk: cm, namespace: undefined, name: 'old' }],
    status: '{"size":2}',
    events: [normal('Sized', 'size 2'), warning('Odd', 'odd')],
    requeueAfterMs: 2n,
  });
  assert.deepEqual(run(() => undefined), { apply: [], delete: [], status: undefined, events: [], requeueAfterMs: undefined });
});

test('failures are thrown as the WIT failure record, with the recorded events', () => {
  for (const [thrown, retry, message] of [
    [permanent('fix the spec').event(warning('Invalid', 'fix the spec')), false, 'fix the spec'],
    [retryable('later'), true, 'later'],
    [new Failure('custom', { retry: false }), false, 'custom'],
  ]) {
    const f = failureOf(() => run((w, ctx) => {
      ctx.recorder.event('Warning', 'Recorded', 'first');
      throw thrown;
    }));
    assert.deepEqual(f, { message, retry, events: [warning('Recorded', 'first'), ...thrown.events] });
  }
  const f = failureOf(() => run(() => { throw new TypeError('oops'); }));
  assert.equal(f.retry, true);
  assert.match(f.message, /^TypeError: oops\n/, 'a JS error crosses with its stack');
  // SpiderMonkey's stack (the component's engine) has only the frames: the message is kept.
  const sm = new Error('boom');
  sm.stack = 'reconcile@plugin.js:10:11\n';
  assert.equal(failureOf(() => run(() => { throw sm; })).message, 'Error: boom\nreconcile@plugin.js:10:11');
  assert.equal(failureOf(() => run(() => new Outcome().apply({ metadata: {} }))).retry, false);
  assert.equal(failureOf(() => run(() => ({ apply: [] }))).message, 'reconcile must return an Outcome');
  const bad = plugin({ info, reconcile: () => undefined }, { cache: fakeCache([]), log });
  assert.match(failureOf(() => bad.reconcile({ primary: '{', owned: [] })).message, /^the primary object does not parse: /);
});

test('the context reads the cache and the owned objects', () => {
  const mine = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'ns', labels: { app: 'x' } } };
  const other = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'b', namespace: 'other', labels: { app: 'x' } } };
  const deployment = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'a', namespace: 'ns' } };
  run((w, ctx) => {
    assert.equal(ctx.get(cm, 'ns', 'a').metadata.name, 'a');
    assert.equal(ctx.get(cm, undefined, 'a').metadata.name, 'a', "undefined namespace: the primary's");
    assert.equal(ctx.get(cm, 'ns', 'b'), undefined);
    assert.equal(ctx.query(cm, undefined, 'app=x').length, 2);
    assert.equal(ctx.query(cm, 'ns', 'app in (x,y)').length, 1);
    assert.equal(ctx.query(cm, 'ns', '!app').length, 0);
    assert.equal(ctx.query(cm, 'ns', 'app in (').length, 0, 'an invalid selector matches nothing');
    assert.deepEqual(ctx.owned(cm).map((o) => o.metadata.name), ['a']);
    ctx.log.warn('careful');
  }, [mine, other], [JSON.stringify(mine), JSON.stringify(deployment)]);
  assert.deepEqual(lines.at(-1), ['warn', 'careful']);
});

test('setStatusCondition keeps lastTransitionTime while the status holds', () => {
  const conds = [];
  assert.equal(setStatusCondition(conds, { type: 'Ready', status: 'False', reason: 'Creating', message: '' }, 't1'), true);
  assert.equal(setStatusCondition(conds, { type: 'Ready', status: 'False', reason: 'Creating', message: '1/3', observedGeneration: 2 }, 't2'), true);
  assert.deepEqual(findStatusCondition(conds, 'Ready'),
    { type: 'Ready', status: 'False', reason: 'Creating', message: '1/3', observedGeneration: 2, lastTransitionTime: 't1' });
  assert.equal(setStatusCondition(conds, { type: 'Ready', status: 'False', reason: 'Creating', message: '1/3', observedGeneration: 2 }, 't3'), false);
  assert.equal(setStatusCondition(conds, { type: 'Ready', status: 'True', reason: 'Available', message: '', observedGeneration: 2 }, 't4'), true);
  assert.equal(conds[0].lastTransitionTime, 't4');
  setStatusCondition(conds, { type: 'Other', status: 'True', reason: 'R', message: '' });
  assert.match(conds[1].lastTransitionTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'whole seconds, UTC, as metav1.Time');
});

test('kwop.d.ts and the generated types type-check a plugin (tsc)', (t) => {
  const here = dirname(fileURLToPath(import.meta.url));
  const tsc = join(here, '../../../guest-foo/js/node_modules/.bin/tsc');
  if (!existsSync(tsc)) return t.skip('no tsc: run guest-foo/js/build.sh (npm ci) first');
  execFileSync(tsc, ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
    join(here, 'typecheck.ts')], { stdio: 'pipe' });
});
