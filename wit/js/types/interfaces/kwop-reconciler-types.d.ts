declare module 'kwop:reconciler/types@0.1.0' {
  /**
   * A Kubernetes object (or part of one) as JSON text, e.g.
   * `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{...},"spec":{...}}`.
   */
  export type Json = string;
  /**
   * A group/version/kind. The core group is the empty string (`""`, e.g. ConfigMap is
   * `{group: "", version: "v1", kind: "ConfigMap"}`).
   */
  export interface Gvk {
    /**
     * API group, `""` for the core group.
     */
    group: string,
    /**
     * API version within the group, e.g. `v1`.
     */
    version: string,
    /**
     * Kind, e.g. `Deployment` (not the plural resource name).
     */
    kind: string,
  }
  /**
   * Names one object.
   */
  export interface ObjectRef {
    /**
     * The object's kind.
     */
    gvk: Gvk,
    /**
     * Its namespace; `none` for cluster-scoped kinds. For namespaced kinds `none` means
     * "the primary's namespace".
     */
    namespace?: string,
    /**
     * Its name.
     */
    name: string,
  }
  /**
   * Severity of an event, as in `kubectl describe`.
   * # Variants
   * 
   * ## `"normal"`
   * 
   * Informational: something happened as expected.
   * ## `"warning"`
   * 
   * Something is wrong and a human may need to look.
   */
  export type EventType = 'normal' | 'warning';
  /**
   * An event the host records on the primary object.
   */
  export interface Event {
    /**
     * `Normal` or `Warning`.
     */
    severity: EventType,
    /**
     * Short PascalCase machine-readable reason, at most 128 bytes (e.g. `Synced`).
     */
    reason: string,
    /**
     * Human-readable message, at most 1024 bytes.
     */
    message: string,
  }
  /**
   * What a plugin is and what it may touch. The host derives its watches and its write fence
   * from this: a plugin can read only `primary`, `owns` and `reads`, and write only `owns`
   * (plus the primary's status).
   */
  export interface PluginInfo {
    /**
     * Plugin name: a DNS label (lowercase letters, digits, `-`, at most 63 bytes). It names
     * the field manager (`kwop-<name>`) and the controller in logs and metrics.
     */
    name: string,
    /**
     * The plugin's own version (free text, semver recommended), shown in logs and metrics.
     */
    version: string,
    /**
     * The kind this plugin reconciles. One reconcile runs per object of this kind.
     */
    primary: Gvk,
    /**
     * Kinds the plugin creates and controls. A change to one of these that is controlled by
     * a primary triggers that primary's reconcile.
     */
    owns: Array<Gvk>,
    /**
     * Other kinds the plugin may read from the cache (no writes). What a reconcile read
     * through `cache.get` / `cache.query` (including a `get` that found nothing) is
     * remembered per primary: a later change to a matching object (created, modified,
     * deleted) reconciles that primary again within about 20 ms. No other change of these
     * kinds triggers anything.
     */
    reads: Array<Gvk>,
  }
  /**
   * The input of one reconcile.
   */
  export interface Request {
    /**
     * The primary object as the cache holds it now (the desired state: spec, metadata).
     */
    primary: Json,
    /**
     * The observed objects of the owned kinds, in the primary's namespace, whose controller
     * owner reference points at this primary (by UID). Objects of an owned kind that the
     * primary does not control are not here; look them up with `cache.get` if needed.
     */
    owned: Array<Json>,
  }
  /**
   * What the world should look like after this reconcile. The host validates the whole
   * outcome first; if any part is invalid, nothing at all is written.
   */
  export interface Outcome {
    /**
     * Desired objects, as server-side apply intents: only the fields this plugin cares
     * about. Each needs `apiVersion`, `kind` and `metadata.name`; `metadata.namespace` may be
     * omitted (it defaults to the primary's). Only kinds listed in `owns`. Do not set
     * `metadata.ownerReferences`: the host sets the controller reference to the primary.
     * The host writes nothing for an intent the observed object already satisfies.
     * Co-ownership: fields this plugin does not set stay whoever's they are (a label or an
     * annotation added by hand survives). A field it sets is restored when someone changes
     * it; in a keyed list (ports, containers, env, …) an item changed or added by someone
     * else is removed and the list becomes exactly the intent's.
     */
    apply: Array<Json>,
    /**
     * Objects to delete. Only objects this primary controls; deleting something already
     * gone is not an error.
     */
    'delete': Array<ObjectRef>,
    /**
     * The primary's new `status` (the value of the `status` field only, a JSON object),
     * written to the status subresource when it differs from the observed status.
     * `none` leaves the status alone.
     */
    status?: Json,
    /**
     * Events to record on the primary. `normal` events are recorded only when this
     * reconcile wrote something (so an in-sync resync records nothing); `warning` events
     * always. `kwop plugin reconcile` prints them all.
     */
    events: Array<Event>,
    /**
     * Reconcile this primary again after this many milliseconds even if nothing changes.
     * `none`: only when something changes (or at the host's resync period).
     */
    requeueAfterMs?: bigint,
  }
  /**
   * A reconcile that could not decide. Nothing is written except `events`.
   */
  export interface Failure {
    /**
     * What went wrong, for logs and the host's Warning event.
     */
    message: string,
    /**
     * Events to record on the primary (e.g. a Warning saying why). Without a `warning` among
     * them the host records a Warning `ReconcileFailed` with `message`: a failure is never
     * silent on the primary.
     */
    events: Array<Event>,
    /**
     * `true`: retry with per-object exponential backoff. `false`: wait until the primary or
     * one of its objects changes (e.g. invalid spec the user must fix).
     */
    retry: boolean,
  }
}
