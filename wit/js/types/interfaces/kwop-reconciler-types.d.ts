declare module 'kwop:reconciler/types@0.2.0' {
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
   * A kind the plugin creates and controls, and how the host tracks its objects.
   */
  export interface OwnedKind {
    /**
     * The kind.
     */
    kind: Gvk,
    /**
     * `false` (as in 0.1): its objects live in the primary's namespace — for a
     * cluster-scoped primary, in any namespace or cluster-scoped — and carry a controller
     * owner reference to the primary, which the host sets; Kubernetes' garbage collector
     * deletes them with the primary.
     * 
     * `true`: its objects may live in any namespace the plugin is granted (a
     * ReconcilerPlugin's `grants.namespaces`, every namespace when unset, and only if the
     * grant of this kind says `acrossNamespaces`; in folder mode: anywhere), or be
     * cluster-scoped; `cache` reads of this kind reach the same namespaces. Owner references cannot cross namespaces, so the host tracks them by
     * labels it sets itself: `kwop.dev/owner-uid` (the primary's uid), `kwop.dev/plugin`
     * (this plugin's name), and the annotation `kwop.dev/owner` (`<namespace>/<name>` of the
     * primary, or `<name>` when cluster-scoped). They arrive in `request.owned` like owned
     * objects with an owner reference; the write fence lets the plugin write or delete only
     * objects of this kind that carry these labels for its primary. Nothing deletes them
     * when the primary goes but the plugin's own `finalize`, so a plugin declaring one must
     * set `plugin-info.finalizes` (the host refuses it otherwise).
     */
    acrossNamespaces: boolean,
  }
  /**
   * What a plugin is and what it may touch. The host derives its watches and its write fence
   * from this: a plugin can read only `primary`, `owns` and `reads`, and write only `owns`
   * (plus the primary's status). On a cluster the admin's grants (a ReconcilerPlugin's
   * `spec.grants`) decide: a plugin declaring more than it is granted is not started.
   */
  export interface PluginInfo {
    /**
     * Plugin name: a DNS label (lowercase letters, digits, `-`, at most 63 bytes). It names
     * the field manager (`kwop-<name>`), the finalizer (`kwop.dev/<name>`) and the
     * controller in logs and metrics.
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
     * Kinds the plugin creates and controls. A change to one of its objects (one that
     * belongs to a primary, by owner reference or by labels) reconciles that primary.
     */
    owns: Array<OwnedKind>,
    /**
     * Other kinds the plugin may read from the cache (no writes). What a reconcile read
     * through `cache.get` / `cache.query` (including a `get` that found nothing) is
     * remembered per primary: a later change to a matching object (created, modified,
     * deleted) reconciles that primary again within about 20 ms. No other change of these
     * kinds triggers anything.
     */
    reads: Array<Gvk>,
    /**
     * Whether the plugin cleans up when a primary is deleted.
     * 
     * `true`: the host adds the finalizer `kwop.dev/<name>` to each primary before it writes
     * anything for it; when the primary is being deleted (its `deletionTimestamp` is set)
     * the host calls `finalize` instead of `reconcile`, and removes the finalizer once
     * `finalize` says `done` — only then does the API server delete the primary.
     * 
     * `false`: `finalize` is never called. A finalizer `kwop.dev/<name>` left on a primary
     * by an earlier version that finalized is removed by the host.
     * 
     * Why a field and not an optional export: a component's exports are fixed by its world
     * (there are no optional exports), and the host must know whether to add the finalizer
     * before the first write to an object it has never called the plugin for; a field also
     * sits with the rest of what the plugin declares, where `kwop plugin inspect` and
     * ReconcilerPlugin status show it. The SDKs give `finalize` a default (done at once), so
     * a plugin that does not finalize writes nothing for it.
     */
    finalizes: boolean,
    /**
     * Whether the plugin checks its primaries before the API server stores them.
     * 
     * `true`: a host serving admission (`kwop run --webhook-bind-address`) registers a
     * validating webhook for the primary kind (CREATE and UPDATE, in the namespaces the plugin
     * is granted) and calls `validate` for each request; a denial is what `kubectl apply`
     * prints. `false`: `validate` is never called. A field and not an optional export, for
     * the reasons `finalizes` gives; the SDKs' default `validate` allows everything.
     */
    validates: boolean,
  }
  /**
   * An instant, as `wasi:clocks/wall-clock` gives it: seconds and nanoseconds since the Unix
   * epoch, UTC.
   */
  export interface Instant {
    /**
     * Whole seconds since 1970-01-01T00:00:00Z.
     */
    seconds: bigint,
    /**
     * Nanoseconds past `seconds`, below 1 000 000 000.
     */
    nanoseconds: number,
  }
  /**
   * The input of one `reconcile` or `finalize` call: everything the call may depend on besides
   * what it reads through `cache` (which the host records), so a recorded request replays to
   * the same outcome.
   */
  export interface Request {
    /**
     * The primary object as the cache holds it now (the desired state: spec, metadata).
     */
    primary: Json,
    /**
     * The observed objects of the owned kinds that belong to this primary: those whose
     * controller owner reference points at it (by UID), and for kinds owned across
     * namespaces those carrying its `kwop.dev/owner-uid` label, in any namespace. Other
     * objects of an owned kind are not here; look them up with `cache.get` if needed.
     * In the order of `owns`, each kind sorted by namespace and name.
     */
    owned: Array<Json>,
    /**
     * The reconcile's instant: what `wasi:clocks/wall-clock` reads during this call, and what
     * a condition's `lastTransitionTime` should say when its status changes. A plugin whose
     * decision depends on the time must say when to look again (`requeue-after-ms`): a
     * reconcile that wrote nothing and asked for no requeue is not repeated until something
     * it read changes (the host memoizes it).
     */
    now: Instant,
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
     * `metadata.ownerReferences`, `metadata.finalizers`, or labels and annotations under
     * `kwop.dev/`: the host sets those itself (the controller reference, or the tracking
     * labels of a kind owned across namespaces).
     * The host writes nothing for an intent the observed object already satisfies.
     * Co-ownership: fields this plugin does not set stay whoever's they are (a label or an
     * annotation added by hand survives). A field it sets is restored when someone changes
     * it; in a keyed list (ports, containers, env, …) an item changed or added by someone
     * else is removed and the list becomes exactly the intent's.
     */
    apply: Array<Json>,
    /**
     * Objects to delete. Only objects that belong to this primary; deleting something
     * already gone is not an error.
     */
    'delete': Array<ObjectRef>,
    /**
     * The primary's new `status` (the value of the `status` field only, a JSON object),
     * written to the status subresource when it differs from the observed status.
     * `none` leaves the status alone. Conditions (`status.conditions`, as
     * `metav1.Condition`: type, status, observedGeneration, lastTransitionTime, reason,
     * message) and `status.observedGeneration` are the usual way to tell users how far a
     * reconcile got; the SDKs have helpers.
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
   * What `finalize` decided for a primary being deleted. Nothing is applied while a primary is
   * being deleted: only deletions, the status and events.
   */
  export interface FinalizeOutcome {
    /**
     * Objects to delete (as in `outcome.delete`: only objects that belong to this primary).
     */
    'delete': Array<ObjectRef>,
    /**
     * The primary's new `status`, as in `outcome.status`.
     */
    status?: Json,
    /**
     * Events to record on the primary, as in `outcome.events`.
     */
    events: Array<Event>,
    /**
     * `true`: the cleanup is complete once these deletions are made. The host makes them,
     * then removes its finalizer, and the API server deletes the primary. `finalize` is not
     * called again for this deletion. `false`: not yet; the host makes the deletions and
     * calls `finalize` again when an owned object changes, or after `requeue-after-ms`.
     */
    done: boolean,
    /**
     * When `done` is `false`: call `finalize` again after this many milliseconds even if
     * nothing changes (`none`: 5 s).
     */
    requeueAfterMs?: bigint,
  }
  /**
   * The kind of change an admission request is about.
   * # Variants
   * 
   * ## `"create"`
   * 
   * The object is being created.
   * ## `"update"`
   * 
   * The object is being changed (`old-object` is the stored version).
   */
  export type Operation = 'create' | 'update';
  /**
   * The input of `validate`: one admission request for a primary, as the API server sends it.
   */
  export interface AdmissionRequest {
    /**
     * CREATE or UPDATE.
     */
    operation: Operation,
    /**
     * The object as it would be stored (defaults applied; on CREATE it has no uid yet, and
     * its `metadata.namespace` is set by the host from the request when the client left it
     * out).
     */
    object: Json,
    /**
     * On UPDATE, the object as it is stored now.
     */
    oldObject?: Json,
    /**
     * Who asks (`userInfo.username`), for messages only.
     */
    user: string,
    /**
     * Whether the request is a dry run (`kubectl apply --dry-run=server`): nothing will be
     * stored either way.
     */
    dryRun: boolean,
    /**
     * The request's instant, as `request.now`.
     */
    now: Instant,
  }
  /**
   * Why an object is refused.
   */
  export interface Violation {
    /**
     * The field at fault, as a path (`spec.deploymentName`), when one is.
     */
    field?: string,
    /**
     * What is wrong and how to fix it: `kubectl apply` prints it.
     */
    message: string,
  }
  /**
   * A call that could not decide. Nothing is written except `events`.
   */
  export interface Failure {
    /**
     * What went wrong, for logs and the host's Warning event.
     */
    message: string,
    /**
     * Events to record on the primary (e.g. a Warning saying why). Without a `warning` among
     * them the host records a Warning `ReconcileFailed` (`FinalizeFailed` from `finalize`)
     * with `message`: a failure is never silent on the primary.
     */
    events: Array<Event>,
    /**
     * `true`: retry with per-object exponential backoff. `false`: wait until the primary or
     * one of its objects changes (e.g. invalid spec the user must fix).
     */
    retry: boolean,
  }
}
