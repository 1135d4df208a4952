// Unit tests of kwop.js (node --test wit/js/test), and the TypeScript check of kwop.d.ts and the
// generated types/ (test/typecheck.ts, with guest-foo/js's tsc, when it is installed).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Failure, Finalize, Outcome, ValidateFailed, acrossNamespaces, allow, deny, fakeAdmission, fakeCache, fakeRequest,
  findStatusCondition, gvk, isStatusConditionTrue, normal, permanent, plugin, removeStatusCondition, retryable,
  setStatusCondition, violation, warning,
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
  plugin({ info, reconcile }, { cache: fakeCache(objects, 'ns'), log }).reconcile({ ...fakeRequest(primary), owned });
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
    { name: 'a', version: '1', primary: cm, owns: [], reads: [], finalizes: false, validates: false });
  const secret = gvk('', 'v1', 'Secret');
  const full = plugin({
    info: { name: 'a', version: '1', primary: cm, owns: [cm, acrossNamespaces(secret)], reads: [secret] },
    reconcile() {}, finalize() {}, validate() {},
  }, { cache: fakeCache([]), log }).info();
  assert.deepEqual(full.owns, [{ kind: cm, acrossNamespaces: false }, { kind: secret, acrossNamespaces: true }]);
  assert.equal(full.finalizes, true, 'a plugin with finalize finalizes');
  assert.equal(full.validates, true, 'a plugin with validate validates');
  const explicit = plugin({ info: { name: 'a', version: '1', primary: cm, finalizes: false, validates: false }, finalize() {}, validate() {} },
    { cache: fakeCache([]), log }).info();
  assert.deepEqual([explicit.finalizes, explicit.validates], [false, false], 'info says otherwise explicitly');
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
  assert.match(failureOf(() => bad.reconcile({ ...fakeRequest('{'), owned: [] })).message, /^the primary object does not parse: /);
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

test('a frame in the build staging folder names the source file, glue frames are dropped', () => {
  const e = new Error('boom');
  e.stack = 'boom@/home/me/p/dist/stage.4242/lib.js:2:9\nreconcile@dist/stage.7/plugin.js:10:3\n' +
    'call@dist/stage.7/kwop.js:187:13\nfn@/tmp/4881d9164101/sources/initializer.js:3199:26\n';
  assert.equal(failureOf(() => run(() => { throw e; })).message, 'Error: boom\nboom@src/lib.js:2:9\nreconcile@src/plugin.js:10:3');
});

test('the request instant is ctx.now; setCondition stamps it with the generation', () => {
  const now = new Date('2026-03-04T05:06:07.890Z');
  const primary = { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w', namespace: 'ns', generation: 7 } };
  const out = plugin({
    info,
    reconcile(w, ctx) {
      assert.equal(ctx.now.toISOString(), now.toISOString());
      assert.equal(ctx.generation, 7);
      const conditions = [];
      assert.equal(ctx.setCondition(conditions, { type: 'Ready', status: 'True', reason: 'Done', message: '' }), true);
      assert.equal(isStatusConditionTrue(conditions, 'Ready'), true);
      return new Outcome().status({ observedGeneration: ctx.generation, conditions });
    },
  }, { cache: fakeCache([]), log }).reconcile(fakeRequest(primary, { now }));
  assert.deepEqual(JSON.parse(out.status), { observedGeneration: 7, conditions: [
    { type: 'Ready', status: 'True', reason: 'Done', message: '', observedGeneration: 7, lastTransitionTime: '2026-03-04T05:06:07Z' }] });
  const conds = [{ type: 'A', status: 'True' }, { type: 'B', status: 'False' }];
  assert.equal(removeStatusCondition(conds, 'A'), true);
  assert.equal(removeStatusCondition(conds, 'A'), false);
  assert.deepEqual(conds.map((c) => c.type), ['B']);
});

const deleting = JSON.stringify({ apiVersion: 'example.com/v1', kind: 'Widget',
  metadata: { name: 'w', namespace: 'ns', uid: 'u1', deletionTimestamp: '2026-01-01T00:00:00Z' } });
const fin = (finalize, owned = []) =>
  plugin({ info, reconcile() {}, finalize }, { cache: fakeCache([]), log }).finalize(fakeRequest(deleting, { owned }));

test('finalize: done, not yet, deletions, status and events cross as the WIT finalize-outcome', () => {
  const copy = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'far' } };
  assert.deepEqual(fin((w, ctx) => {
    ctx.recorder.event('Normal', 'Cleaning', 'one copy');
    return Finalize.done().delete(cm, ctx.owned(cm)[0].metadata.namespace, 'c').status({ phase: 'Deleting' });
  }, [copy]), {
    delete: [{ gvk: cm, namespace: 'far', name: 'c' }], status: '{"phase":"Deleting"}',
    events: [normal('Cleaning', 'one copy')], done: true, requeueAfterMs: undefined,
  });
  assert.deepEqual(fin(() => Finalize.notYet().requeueAfter(2500).event(warning('Waiting', 'backend busy'))), {
    delete: [], status: undefined, events: [warning('Waiting', 'backend busy')], done: false, requeueAfterMs: 2500n,
  });
  assert.equal(fin(() => undefined).done, true, 'nothing returned: done');
  assert.equal(plugin({ info, reconcile() {} }, { cache: fakeCache([]), log }).finalize(fakeRequest(deleting)).done, true,
    'no finalize: done at once');
});

test('finalize: a thrown error is a failure with its message and stack, a Failure as it is', () => {
  const f = failureOf(() => fin(function cleanup() { throw new Error('cleanup backend unavailable'); }));
  assert.equal(f.retry, true);
  assert.match(f.message, /^Error: cleanup backend unavailable\n.*cleanup/);
  assert.match(f.message, /kwop\.test\.mjs/, 'the stack names the source file');
  assert.deepEqual(failureOf(() => fin(() => { throw permanent('no').event(warning('Stuck', 'no')); })),
    { message: 'no', retry: false, events: [warning('Stuck', 'no')] });
  assert.equal(failureOf(() => fin(() => new Outcome())).message, 'finalize must return a Finalize');
});

const val = (validate, req) => plugin({ info, reconcile() {}, validate }, { cache: fakeCache([cmObj], 'ns'), log }).validate(req);
const cmObj = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'taken', namespace: 'ns' } };
const widget = (size) => ({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w', namespace: 'ns' }, spec: { size } });

test('validate: allowed with warnings, refused with violations (thrown as the WIT err)', () => {
  const v = (a, ctx) => {
    assert.equal(ctx.get(cm, undefined, 'taken').metadata.name, 'taken', 'the cache, in the object namespace');
    if (a.object.spec.size > 3) return deny(violation('spec.size', 'at most 3'), 'and something else');
    if (a.operation === 'update' && a.oldObject.spec.size !== a.object.spec.size) return allow('size changed');
    return a.dryRun ? ['dry'] : undefined;
  };
  assert.deepEqual(val(v, fakeAdmission(widget(1))), []);
  assert.deepEqual(val(v, fakeAdmission(widget(1), { dryRun: true })), ['dry']);
  assert.deepEqual(val(v, fakeAdmission(widget(2), { oldObject: widget(1) })), ['size changed']);
  assert.deepEqual(failureOf(() => val(v, fakeAdmission(widget(9)))),
    [{ field: 'spec.size', message: 'at most 3' }, { field: undefined, message: 'and something else' }]);
  assert.deepEqual(plugin({ info, reconcile() {} }, { cache: fakeCache([]), log }).validate(fakeAdmission(widget(9))), [],
    'no validate: allowed');
  assert.throws(() => deny(), /at least one violation/);
});

test('validate: a thrown error is not a refusal: the call fails with its message and stack', () => {
  const before = lines.length;
  const f = failureOf(() => val(function check() { throw new RangeError('size service down'); }, fakeAdmission(widget(1))));
  assert.ok(f instanceof ValidateFailed, 'not a list of violations');
  // The glue reads `length` of the thrown value to lower violations: that throws the error, so the
  // call traps with the message StarlingMonkey prints ("message", "Stack:", frames).
  const printed = (() => { try { return f.length; } catch (e) { return e; } })();
  assert.ok(printed instanceof Error);
  assert.match(printed.message, /^RangeError: size service down\nStack:\n {2}.*check.*kwop\.test\.mjs/);
  assert.match(lines.slice(before).map((l) => l.join(' ')).join('\n'), /^error validate threw: RangeError: size service down/);
  const wrong = failureOf(() => val(() => 42, fakeAdmission(widget(1))));
  assert.match(wrong.error.message, /^TypeError: validate must return allow/);
});
