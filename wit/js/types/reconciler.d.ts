/// <reference path="./interfaces/kwop-reconciler-cache.d.ts" />
/// <reference path="./interfaces/kwop-reconciler-log.d.ts" />
/// <reference path="./interfaces/kwop-reconciler-types.d.ts" />
declare module 'kwop:reconciler/reconciler@0.2.0' {
  export type PluginInfo = import('kwop:reconciler/types@0.2.0').PluginInfo;
  export type Request = import('kwop:reconciler/types@0.2.0').Request;
  export type Outcome = import('kwop:reconciler/types@0.2.0').Outcome;
  export type FinalizeOutcome = import('kwop:reconciler/types@0.2.0').FinalizeOutcome;
  export type Failure = import('kwop:reconciler/types@0.2.0').Failure;
  export type AdmissionRequest = import('kwop:reconciler/types@0.2.0').AdmissionRequest;
  export type Violation = import('kwop:reconciler/types@0.2.0').Violation;
  export type * as KwopReconcilerCache020 from 'kwop:reconciler/cache@0.2.0'; // import kwop:reconciler/cache@0.2.0
  export type * as KwopReconcilerLog020 from 'kwop:reconciler/log@0.2.0'; // import kwop:reconciler/log@0.2.0
  export type * as KwopReconcilerTypes020 from 'kwop:reconciler/types@0.2.0'; // import kwop:reconciler/types@0.2.0
  /**
  * Describes the plugin. Must be cheap and deterministic: the host calls it when loading.
  */
  export function info(): PluginInfo;
  /**
  * Decides what should change for one primary object that is not being deleted. Must not
  * assume anything survives between calls (the host uses a fresh instance each time).
  */
  export function reconcile(req: Request): Outcome;
  /**
  * Cleans up for a primary being deleted (its `deletionTimestamp` is set). Called only when
  * `info().finalizes` is `true`, and only while the primary still carries the finalizer
  * `kwop.dev/<name>`; once it returns `done` (and its deletions are made) it is not called
  * again for that primary. A failure or a trap is retried with backoff and is visible: a
  * Warning event `FinalizeFailed` on the primary, the condition `Finalized` (status False,
  * reason FinalizeFailed) in its `status.conditions` when its schema has them, and the
  * metric `kwop_finalize_total{result="error"}`.
  */
  export function finalize(req: Request): FinalizeOutcome;
  /**
  * Checks a primary before the API server stores it: `ok` with warnings (each printed by
  * `kubectl` as `Warning: ...`, at most 16, 512 bytes each) allows it; `err` with at least one
  * violation refuses it, and the API server answers the client with the violations. Called
  * only when `info().validates` is `true` and the host serves admission. Runs under the same
  * sandbox as `reconcile` (its deadline the smaller of the plugin's and the webhook's timeout)
  * with the same `cache` view (reads outside the granted namespaces find nothing). It must
  * not depend on writes: it writes nothing, and the object it sees may never be stored. A trap
  * or a deadline denies the request under the failure policy `Fail` (the reason is the
  * message) and allows it under `Ignore` (and is logged).
  */
  export function validate(req: AdmissionRequest): Array<string>;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
