/// <reference path="./kwop-reconciler-types.d.ts" />
declare module 'kwop:reconciler/cache@0.2.0' {
  /**
   * One object by name. `namespace`: `none` for cluster-scoped kinds; for namespaced kinds
   * `none` means the primary's namespace (the host and `kwop plugin reconcile` alike).
   */
  export function get(kind: Gvk, namespace: string | undefined, name: string): Json | undefined;
  /**
   * Objects of a kind, optionally in one namespace and matching a label selector in the
   * usual syntax (`app=nginx,tier in (web),!legacy`). An invalid selector returns an empty list.
   */
  export function query(kind: Gvk, namespace: string | undefined, labelSelector: string | undefined): Array<Json>;
  export type Gvk = import('kwop:reconciler/types@0.2.0').Gvk;
  export type Json = import('kwop:reconciler/types@0.2.0').Json;
}
