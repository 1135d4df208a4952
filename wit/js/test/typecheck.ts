// Compiled by test/kwop.test.mjs with `tsc --noEmit`: the declarations describe a plugin that
// type-checks, and catch a wrong one (see the @ts-expect-error lines).
import { plugin, gvk, Outcome, permanent, normal, fakeCache, setStatusCondition, type Condition } from '../kwop.js';

interface Foo {
  metadata: { name: string; namespace?: string; generation?: number };
  spec: { message?: string };
  status?: { conditions?: Condition[] };
}

const configMaps = gvk('', 'v1', 'ConfigMap');
const log = { log(_level: 'trace' | 'debug' | 'info' | 'warn' | 'error', _message: string) {} };

export const { info, reconcile } = plugin<Foo>(
  {
    info: { name: 'typed', version: '0.1.0', primary: gvk('example.com', 'v1', 'Foo'), owns: [configMaps] },
    reconcile(foo, ctx) {
      if (!foo.spec.message) throw permanent('spec.message is empty').event(normal('Empty', 'no message'));
      const existing = ctx.get<{ data?: Record<string, string> }>(configMaps, foo.metadata.namespace, 'x');
      ctx.recorder.event('Normal', 'Seen', String(existing?.data?.k));
      ctx.log.info('hello');
      const conditions = foo.status?.conditions ?? [];
      setStatusCondition(conditions, { type: 'Ready', status: 'True', reason: 'Done', message: '', observedGeneration: foo.metadata.generation });
      return new Outcome()
        .applyAs(configMaps, { metadata: { name: `${foo.metadata.name}-info` }, data: { message: foo.spec.message } })
        .status({ conditions })
        .requeueAfter(1000);
    },
  },
  { cache: fakeCache([]), log },
);

const out = reconcile({ primary: '{}', owned: [] });
const n: number = out.apply.length;
// @ts-expect-error requeueAfterMs is a bigint
const wrong: number = out.requeueAfterMs;
// @ts-expect-error a severity is 'normal' or 'warning'
const bad = normal('a', 'b').severity === 'error';
export { n, wrong, bad };
