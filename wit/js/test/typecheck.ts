// Compiled by test/kwop.test.mjs with `tsc --noEmit`: the declarations describe a plugin that
// type-checks, and catch a wrong one (see the @ts-expect-error lines).
import {
  plugin, gvk, Outcome, Finalize, permanent, normal, fakeCache, fakeRequest, fakeAdmission, setStatusCondition,
  acrossNamespaces, deny, violation, allow, type Condition,
} from '../kwop.js';

interface Foo {
  metadata: { name: string; namespace?: string; generation?: number };
  spec: { message?: string };
  status?: { conditions?: Condition[] };
}

const configMaps = gvk('', 'v1', 'ConfigMap');
const secrets = gvk('', 'v1', 'Secret');
const log = { log(_level: 'trace' | 'debug' | 'info' | 'warn' | 'error', _message: string) {} };

export const { info, reconcile, finalize, validate } = plugin<Foo>(
  {
    info: {
      name: 'typed', version: '0.1.0', primary: gvk('example.com', 'v1', 'Foo'),
      owns: [configMaps, acrossNamespaces(secrets)],
    },
    reconcile(foo, ctx) {
      if (!foo.spec.message) throw permanent('spec.message is empty').event(normal('Empty', 'no message'));
      const existing = ctx.get<{ data?: Record<string, string> }>(configMaps, foo.metadata.namespace, 'x');
      ctx.recorder.event('Normal', 'Seen', String(existing?.data?.k));
      ctx.log.info('hello');
      const conditions = foo.status?.conditions ?? [];
      setStatusCondition(conditions, { type: 'Ready', status: 'True', reason: 'Done', message: '', observedGeneration: foo.metadata.generation });
      ctx.setCondition(conditions, { type: 'Synced', status: 'True', reason: 'Done', message: '' });
      const at: Date = ctx.now;
      return new Outcome()
        .applyAs(configMaps, { metadata: { name: `${foo.metadata.name}-info` }, data: { message: foo.spec.message, at: at.toISOString() } })
        .status({ conditions, observedGeneration: ctx.generation })
        .requeueAfter(1000);
    },
    finalize(_foo, ctx) {
      const copies = ctx.owned<{ metadata: { name: string; namespace: string } }>(secrets);
      const f = copies.length ? Finalize.notYet().requeueAfter(100) : Finalize.done();
      return copies.reduce((acc, c) => acc.delete(secrets, c.metadata.namespace, c.metadata.name), f);
    },
    validate({ object, oldObject, operation }) {
      if (!object.spec.message) return deny(violation('spec.message', 'is required'));
      if (operation === 'update' && oldObject?.spec.message !== object.spec.message) return allow('message changed');
      return ['fine'];
    },
  },
  { cache: fakeCache([]), log },
);

const out = reconcile(fakeRequest({ metadata: { name: 'a' }, spec: {} }));
const n: number = out.apply.length;
const done: boolean = finalize(fakeRequest('{}')).done;
const warnings: string[] = validate(fakeAdmission({ spec: {} }));
// @ts-expect-error requeueAfterMs is a bigint
const wrong: number = out.requeueAfterMs;
// @ts-expect-error a severity is 'normal' or 'warning'
const bad = normal('a', 'b').severity === 'error';
// @ts-expect-error finalize returns a Finalize, not an Outcome
plugin({ info: { name: 'x', version: '1', primary: configMaps }, reconcile: () => undefined, finalize: () => new Outcome() }, { cache: fakeCache([]), log });
export { n, done, warnings, wrong, bad };
