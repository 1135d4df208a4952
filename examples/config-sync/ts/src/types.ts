// The objects config-sync reads and writes (a port of ../src/types.rs): the ConfigSync custom
// resource, and narrow views of the source, of Namespaces and of the copies it owns. Every field
// is optional: a spec the CRD would refuse (folder mode has no API server to check it) becomes an
// InvalidSpec condition, not a parse failure, and a source's data is never inspected, only copied.
import type { Condition, Gvk } from './kwop.js';

export interface SourceRef {
  kind?: string;
  namespace?: string;
  name?: string;
}

export interface Requirement {
  key?: string;
  operator?: string;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Requirement[];
}

export interface ConfigSyncStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  synced?: number;
  conflicts?: string[];
}

/** The ConfigSync custom resource (`examples.kwop.dev/v1alpha1`, cluster-scoped). */
export interface ConfigSync {
  metadata?: { name?: string; generation?: number };
  spec?: { source?: SourceRef; namespaceSelector?: LabelSelector };
  status?: ConfigSyncStatus;
}

/** What is copied of a source: its data as the JSON it is. */
export interface Source {
  data?: unknown;
  binaryData?: unknown;
  type?: unknown;
}

export interface Namespace {
  metadata?: { name?: string; deletionTimestamp?: unknown };
  status?: { phase?: unknown };
}

/** The kinds config-sync copies. */
export type Kind = 'ConfigMap' | 'Secret';
export const KINDS: readonly Kind[] = ['ConfigMap', 'Secret'];
export const kindGvk = (kind: Kind): Gvk => ({ group: '', version: 'v1', kind });

export function isTerminating(n: Namespace): boolean {
  const t = n.metadata?.deletionTimestamp;
  return (t !== undefined && t !== null) || n.status?.phase === 'Terminating';
}

/** One copy: kind, namespace, name. */
export interface CopyRef {
  kind: Kind;
  namespace: string;
  name: string;
}

export const copyKey = (c: CopyRef): string => `${KINDS.indexOf(c.kind)}\u0000${c.namespace}\u0000${c.name}`;

/** The copies among a request's owned objects, sorted (kind, namespace, name), without duplicates. */
export function copiesOf(owned: Array<{ apiVersion?: unknown; kind?: unknown; metadata?: { namespace?: unknown; name?: unknown } }>): CopyRef[] {
  const out = new Map<string, CopyRef>();
  for (const o of owned) {
    if (o.apiVersion !== 'v1' || !KINDS.includes(o.kind as Kind)) continue;
    const { namespace, name } = o.metadata ?? {};
    if (typeof namespace !== 'string' || typeof name !== 'string' || !namespace || !name) continue;
    const c: CopyRef = { kind: o.kind as Kind, namespace, name };
    out.set(copyKey(c), c);
  }
  return [...out.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, c]) => c);
}
