// config-sync as a kwop plugin in TypeScript (the Rust one is ../src/plugin.rs): keeps a copy of
// one source ConfigMap or Secret in every namespace a label selector picks. The decisions are in
// sync.ts; this module is the component's entry: the world kwop:reconciler@0.2 through kwop.js.
import * as cache from 'kwop:reconciler/cache@0.2.0';
import * as log from 'kwop:reconciler/log@0.2.0';
import { Finalize, Outcome, acrossNamespaces, gvk, plugin, type Context } from './kwop.js';
import { cleanup, sync, type Decision, type Delete } from './sync.js';
import { copiesOf, kindGvk, type ConfigSync, type Kind, type Namespace, type Source } from './types.js';

const NAMESPACES = gvk('', 'v1', 'Namespace');

/** The copies this ConfigSync owns (from the request: across namespaces, by the host's labels). */
const owned = (ctx: Context) => copiesOf([...ctx.owned(kindGvk('ConfigMap')), ...ctx.owned(kindGvk('Secret'))]);

function deletions<T extends Outcome | Finalize>(out: T, list: Delete[]): T {
  for (const d of list) out.delete(kindGvk(d.kind), d.namespace, d.name);
  return out;
}

export const { info, reconcile, finalize, validate } = plugin<ConfigSync>(
  {
    info: {
      name: 'config-sync',
      version: '0.1.0',
      primary: gvk('examples.kwop.dev', 'v1alpha1', 'ConfigSync'),
      owns: [acrossNamespaces(kindGvk('ConfigMap')), acrossNamespaces(kindGvk('Secret'))],
      reads: [NAMESPACES],
    },
    reconcile(cs, ctx) {
      const now = ctx.now.toISOString().replace(/\.\d+Z$/, 'Z');
      const d: Decision = sync(cs, {
        source: (kind: Kind, ns: string, name: string) => ctx.get<Source>(kindGvk(kind), ns, name),
        // The empty selector selects every namespace: ask for all of them.
        namespaces: (selector: string) => ctx.query<Namespace>(NAMESPACES, undefined, selector || undefined),
        exists: (kind: Kind, ns: string, name: string) => ctx.get(kindGvk(kind), ns, name) !== undefined,
        owned: owned(ctx),
      }, now);
      // Counts only: no data, not even a key, reaches the log.
      ctx.log.debug(`${d.apply.length} copies applied, ${d.delete.length} deleted, ${d.status.conflicts?.length ?? 0} conflicts`);
      return deletions(new Outcome().status(d.status).apply(...d.apply), d.delete).event(...d.events);
    },
    finalize(_cs, ctx) {
      const c = cleanup(owned(ctx));
      return deletions(Finalize.done(), c.delete).event(c.event);
    },
  },
  { cache, log },
);
