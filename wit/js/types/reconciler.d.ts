/// <reference path="./interfaces/kwop-reconciler-cache.d.ts" />
/// <reference path="./interfaces/kwop-reconciler-log.d.ts" />
/// <reference path="./interfaces/kwop-reconciler-types.d.ts" />
declare module 'kwop:reconciler/reconciler@0.1.0' {
  export type PluginInfo = import('kwop:reconciler/types@0.1.0').PluginInfo;
  export type Request = import('kwop:reconciler/types@0.1.0').Request;
  export type Outcome = import('kwop:reconciler/types@0.1.0').Outcome;
  export type Failure = import('kwop:reconciler/types@0.1.0').Failure;
  export type * as KwopReconcilerCache010 from 'kwop:reconciler/cache@0.1.0'; // import kwop:reconciler/cache@0.1.0
  export type * as KwopReconcilerLog010 from 'kwop:reconciler/log@0.1.0'; // import kwop:reconciler/log@0.1.0
  export type * as KwopReconcilerTypes010 from 'kwop:reconciler/types@0.1.0'; // import kwop:reconciler/types@0.1.0
  /**
  * Describes the plugin. Must be cheap and deterministic: the host calls it when loading.
  */
  export function info(): PluginInfo;
  /**
  * Decides what should change for one primary object. Must not assume anything survives
  * between calls (the host may use a fresh instance each time).
  */
  export function reconcile(req: Request): Outcome;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
