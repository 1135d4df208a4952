// The config-sync decisions (a port of ../src/sync.rs): which copies to apply, which to delete,
// the status and the events, as plain functions over plain inputs (no host calls), so they run
// in Node's test runner.
//
// What the rules protect:
// - an object config-sync did not create is never written or deleted (a conflict instead);
// - a source that is briefly missing, or a spec that is invalid, never wipes the copies: nothing
//   is applied or deleted until it is back or fixed;
// - a Secret's data appears only in the apply intents: events, status and messages name kinds,
//   namespaces, names and counts, never a value.
import { normal, warning, type Condition, type Event } from './kwop.js';
import { SelectorError, isDnsLabel, isDnsSubdomain, quote, toQuery } from './selector.js';
import {
  KINDS, copyKey, isTerminating, type ConfigSync, type ConfigSyncStatus, type CopyRef, type Kind,
  type Namespace, type Source, type SourceRef,
} from './types.js';

export const READY = 'Ready';
export const SYNCED = 'Synced';
export const CONFLICT = 'Conflict';
export const SOURCE_NOT_FOUND = 'SourceNotFound';
export const INVALID_SPEC = 'InvalidSpec';
export const ERR_RESOURCE_EXISTS = 'ErrResourceExists';
export const CLEANED = 'Cleaned';
/** The annotation on every copy: `<namespace>/<name>` of its source. */
export const SOURCE_ANNOTATION = 'examples.kwop.dev/config-sync-source';
/** At most this many ErrResourceExists events name a namespace; one more counts the rest. */
export const MAX_CONFLICT_EVENTS = 5;
const NAMED_IN_MESSAGE = 3;

/** What a reconcile reads, as functions (the host's cache, or a test's). */
export interface World {
  source(kind: Kind, namespace: string, name: string): Source | undefined;
  namespaces(selector: string): Namespace[];
  exists(kind: Kind, namespace: string, name: string): boolean;
  owned: CopyRef[];
}

/** A deletion, as the Outcome takes it. */
export interface Delete {
  kind: Kind;
  namespace: string;
  name: string;
}

export interface Decision {
  apply: Record<string, unknown>[];
  delete: Delete[];
  status: ConfigSyncStatus;
  events: Event[];
}

/** One reconcile of a ConfigSync at the instant `now` (RFC 3339, for the conditions). */
export function sync(cs: ConfigSync, world: World, now: string): Decision {
  const src: Required<SourceRef> = { kind: '', namespace: '', name: '', ...cs.spec?.source };
  let kind: Kind;
  let query: string;
  try {
    kind = checkSource(src);
    query = toQuery(cs.spec?.namespaceSelector ?? {});
  } catch (e) {
    if (!(e instanceof SelectorError)) throw e;
    return held(cs, INVALID_SPEC, e.message, now);
  }
  const source = world.source(kind, src.namespace, src.name);
  if (source === undefined) {
    const why = `source ${kind} ${quote(src.name)} not found in namespace ${quote(src.namespace)}: the existing copies are kept until it is back`;
    return held(cs, SOURCE_NOT_FOUND, why, now);
  }

  const targets = [...new Set(world.namespaces(query)
    .filter((n) => !isTerminating(n))
    .map((n) => n.metadata?.name ?? '')
    .filter((n) => n !== '' && n !== src.namespace))].sort();
  const owned = new Set(world.owned.map(copyKey));
  const apply: Record<string, unknown>[] = [];
  const wanted = new Set<string>();
  const conflicts: string[] = [];
  for (const ns of targets) {
    const copy: CopyRef = { kind, namespace: ns, name: src.name };
    if (!owned.has(copyKey(copy)) && world.exists(kind, copy.namespace, copy.name)) {
      conflicts.push(ns);
      continue;
    }
    apply.push(intent(copy, src, source));
    wanted.add(copyKey(copy));
  }
  const isSource = (c: CopyRef): boolean => c.kind === kind && c.namespace === src.namespace && c.name === src.name;
  const del = world.owned.filter((c) => !wanted.has(copyKey(c)) && !isSource(c)).map(deleteOf);

  const synced = apply.length;
  const copied = `copied to ${namespaces(synced)}`;
  const events = conflictEvents(kind, src.name, cs.metadata?.name ?? '', conflicts);
  events.push(normal(SYNCED, `ConfigSync synced to ${namespaces(synced)}`));
  const generation = cs.metadata?.generation;
  const ready: Condition = conflicts.length === 0
    ? { type: READY, status: 'True', reason: SYNCED, message: copied }
    : {
      type: READY,
      status: 'False',
      reason: CONFLICT,
      message: `${copied}; ${conflicts.length === 1 ? '1 namespace holds' : `${conflicts.length} namespaces hold`} a ${kind} ${quote(src.name)} not managed by this ConfigSync: ${firstFew(conflicts)}`,
    };
  const status: ConfigSyncStatus = { observedGeneration: generation, conditions: previous(cs).conditions ?? [], synced };
  if (conflicts.length) status.conflicts = conflicts;
  setCondition(status.conditions ?? [], ready, generation, now);
  return { apply, delete: del, status, events };
}

/** What finalize does: delete every copy; the event counts them. */
export function cleanup(owned: CopyRef[]): { delete: Delete[]; event: Event } {
  const n = owned.length;
  return { delete: owned.map(deleteOf), event: normal(CLEANED, `deleted ${n} ${n === 1 ? 'copy' : 'copies'}`) };
}

function intent(copy: CopyRef, src: Required<SourceRef>, source: Source): Record<string, unknown> {
  const o: Record<string, unknown> = {
    apiVersion: 'v1',
    kind: copy.kind,
    metadata: { name: copy.name, namespace: copy.namespace, annotations: { [SOURCE_ANNOTATION]: `${src.namespace}/${src.name}` } },
  };
  const put = (field: string, v: unknown): void => {
    if (v !== undefined && v !== null) o[field] = v;
  };
  put('data', source.data);
  put('binaryData', source.binaryData);
  if (copy.kind === 'Secret') put('type', source.type);
  return o;
}

// The spec cannot be acted on, or the source is missing: nothing is applied or deleted.
function held(cs: ConfigSync, reason: string, message: string, now: string): Decision {
  const status = previous(cs);
  status.observedGeneration = cs.metadata?.generation;
  status.conditions ??= [];
  setCondition(status.conditions, { type: READY, status: 'False', reason, message }, cs.metadata?.generation, now);
  return { apply: [], delete: [], status, events: [warning(reason, message)] };
}

// kwop-guest's set_condition (Rust): one condition per type, replaced whole; its transition
// time is kept while the status holds (and it has one), else it is `now`.
function setCondition(conditions: Condition[], c: Condition, generation: number | undefined, now: string): void {
  const next: Condition = { type: c.type, status: c.status, lastTransitionTime: now, reason: c.reason, message: c.message };
  if (generation !== undefined) next.observedGeneration = generation;
  const i = conditions.findIndex((x) => x.type === c.type);
  if (i < 0) {
    conditions.push(next);
    return;
  }
  const old = conditions[i];
  if (old.status === next.status && old.lastTransitionTime) next.lastTransitionTime = old.lastTransitionTime;
  conditions[i] = next;
}

function previous(cs: ConfigSync): ConfigSyncStatus {
  const s = cs.status ?? {};
  const out: ConfigSyncStatus = { synced: typeof s.synced === 'number' ? s.synced : 0 };
  if (Array.isArray(s.conditions) && s.conditions.length) out.conditions = s.conditions.map((c) => ({ ...c }));
  if (Array.isArray(s.conflicts) && s.conflicts.length) out.conflicts = [...s.conflicts];
  if (typeof s.observedGeneration === 'number') out.observedGeneration = s.observedGeneration;
  return out;
}

function checkSource(src: Required<SourceRef>): Kind {
  const kind = KINDS.find((k) => k === src.kind);
  if (!kind) throw new SelectorError(`spec.source.kind ${quote(src.kind)} is not supported: it must be ConfigMap or Secret`);
  if (!isDnsLabel(src.namespace)) throw new SelectorError(`spec.source.namespace ${quote(src.namespace)} is not a valid namespace name`);
  if (!isDnsSubdomain(src.name)) throw new SelectorError(`spec.source.name ${quote(src.name)} is not a valid ${kind} name`);
  return kind;
}

function conflictEvents(kind: Kind, name: string, syncName: string, conflicts: string[]): Event[] {
  const events = conflicts.slice(0, MAX_CONFLICT_EVENTS).map((ns) => warning(ERR_RESOURCE_EXISTS,
    `${kind} ${quote(name)} in namespace ${quote(ns)} already exists and is not managed by ConfigSync ${quote(syncName)}`));
  const rest = conflicts.length - MAX_CONFLICT_EVENTS;
  if (rest > 0) {
    events.push(warning(ERR_RESOURCE_EXISTS,
      `${kind} ${quote(name)} also exists and is not managed by ConfigSync ${quote(syncName)} in ${rest} more ${rest === 1 ? 'namespace' : 'namespaces'} (see status.conflicts)`));
  }
  return events;
}

const deleteOf = (c: CopyRef): Delete => ({ kind: c.kind, namespace: c.namespace, name: c.name });

const namespaces = (n: number): string => (n === 1 ? '1 namespace' : `${n} namespaces`);

function firstFew(names: string[]): string {
  const shown = names.slice(0, NAMED_IN_MESSAGE).join(', ');
  const more = names.length - NAMED_IN_MESSAGE;
  return more > 0 ? `${shown} and ${more} more` : shown;
}

