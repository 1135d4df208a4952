"""kwop: write a kwop plugin (`kwop:reconciler@0.2`, wit/v0.2/reconciler.wit) in Python without
the WIT plumbing, with type hints: reconcile, and optionally finalize (cleanup before a primary
goes) and validate (admission, before the API server stores a primary).

Copy this file next to your app module (or put its folder on componentize-py's --python-path)::

    import kwop

    CONFIG_MAPS = kwop.GVK("", "v1", "ConfigMap")

    class Plugin(kwop.Reconciler):
        def info(self) -> kwop.Info:
            return kwop.Info("my-plugin", "0.1.0", kwop.GVK("example.com", "v1", "Foo"), owns=[CONFIG_MAPS])

        def reconcile(self, foo: dict, ctx: kwop.Context) -> kwop.Outcome:
            message = foo.get("spec", {}).get("message")
            if not message:
                raise kwop.permanent("spec.message is empty")
            return kwop.Outcome().apply_as(CONFIG_MAPS, {"metadata": {"name": foo["metadata"]["name"] + "-info"},
                                                          "data": {"message": message}})

        def finalize(self, foo: dict, ctx: kwop.Context) -> kwop.FinalizeOutcome:  # Info(finalizes=True)
            return kwop.FinalizeOutcome().event(kwop.normal("CleanedUp", "nothing left behind"))

        def validate(self, req: kwop.Admission, ctx: kwop.Context) -> list:       # Info(validates=True)
            if not req.object.get("spec", {}).get("message"):
                raise kwop.refuse("must not be empty", field="spec.message")
            return []  # warnings

    WitWorld = kwop.export(Plugin())   # what componentize-py calls

A raised kwop.Failure is the WIT `failure`; any other exception in reconcile or finalize becomes a
retried failure whose message is the exception (`ValueError: ...`) and its traceback, naming the
plugin's own files (src/...). In validate an exception is not a refusal: the call fails (the
webhook's failurePolicy decides) with the same message. The world is the one the bindings were
generated from: on the 0.1 WIT (wit/reconciler.wit) finalize and validate are not exported and
finalizes/validates/across-namespaces are refused.

`kwop_testing.run(Plugin(), primary, kwop_testing.FakeCache([...]))` (and `finalize`, `validate`)
runs the same code natively for unit tests (kwop_testing.py, next to this file; not needed in the
component).
Everything crosses to the host as JSON text (see wit/reconciler.wit); pass `json=` (an object with
`loads` and `dumps`) to `export`/`run` to use another codec than the standard library's.
"""

from __future__ import annotations

import json as _json
import os
import sys
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Literal, Optional, Protocol, Tuple, TypedDict, Union


@dataclass(frozen=True)
class GVK:
    """A group/version/kind; the core group is ""."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class Owned:
    """An owned kind whose objects may live in other namespaces (or be cluster-scoped): the host
    tracks them by labels instead of owner references, and only the plugin's finalize deletes
    them, so Info needs finalizes=True. A plain GVK in Info.owns is owned in the primary's
    namespace (deleted with it by Kubernetes' garbage collector)."""

    gvk: GVK
    across_namespaces: bool = True


def across_namespaces(gvk: GVK) -> Owned:
    """`gvk` owned across namespaces (see Owned)."""
    return Owned(gvk, True)


@dataclass
class Info:
    """What the plugin is and what it may touch (the host watches exactly these kinds).

    finalizes: the host keeps the finalizer `kwop.dev/<name>` on each primary and calls finalize
    when one is deleted. validates: a host serving admission calls validate before a primary is
    stored."""

    name: str
    version: str
    primary: GVK
    owns: List[Union[GVK, Owned]] = field(default_factory=list)
    reads: List[GVK] = field(default_factory=list)
    finalizes: bool = False
    validates: bool = False

    def owned_kinds(self) -> List[Owned]:
        """owns, each as an Owned (a plain GVK: not across namespaces)."""
        out = []
        for o in self.owns:
            if isinstance(o, Owned):
                out.append(o)
            elif isinstance(o, GVK):
                out.append(Owned(o, False))
            else:
                raise TypeError("Info.owns takes kwop.GVK or kwop.Owned items, not %s" % type(o).__name__)
        return out


Severity = Literal["normal", "warning"]


@dataclass(frozen=True)
class Event:
    """An event to record on the primary."""

    severity: Severity
    reason: str
    message: str


def normal(reason: str, message: str) -> Event:
    return Event("normal", reason, message)


def warning(reason: str, message: str) -> Event:
    return Event("warning", reason, message)


class Failure(Exception):
    """A reconcile that could not decide: raise it. Nothing is written except its events."""

    def __init__(self, message: str, retry: bool = True, events: Optional[List[Event]] = None):
        super().__init__(message)
        self.message = message
        self.retry = retry
        self.events: List[Event] = list(events or [])

    def event(self, e: Event) -> "Failure":
        self.events.append(e)
        return self


def retryable(message: str) -> Failure:
    """A failure retried with per-object backoff (what any other exception is)."""
    return Failure(message, retry=True)


def permanent(message: str) -> Failure:
    """A failure only a change of the primary (or of its objects) can fix: no retry."""
    return Failure(message, retry=False)


@dataclass(frozen=True)
class ObjectRef:
    gvk: GVK
    namespace: Optional[str]
    name: str


class Outcome:
    """What should change; build it by chaining."""

    def __init__(self) -> None:
        self.intents: List[Any] = []
        self.deletes: List[ObjectRef] = []
        self.new_status: Optional[Any] = None
        self.events: List[Event] = []
        self.requeue_ms: Optional[int] = None

    def apply(self, *objects: Any) -> "Outcome":
        """Server-side apply intents: objects with apiVersion, kind and metadata.name."""
        for o in objects:
            if not _field(o, "apiVersion") or not _field(o, "kind"):
                raise permanent("an intent needs apiVersion and kind (use apply_as): %.80r" % (o,))
            self.intents.append(o)
        return self

    def apply_as(self, gvk: GVK, obj: Dict[str, Any]) -> "Outcome":
        """An intent whose apiVersion and kind come from gvk."""
        return self.apply({"apiVersion": gvk.api_version, "kind": gvk.kind, **obj})

    def delete(self, gvk: GVK, namespace: Optional[str], name: str) -> "Outcome":
        """An object to delete (only objects this primary controls); namespace None: the primary's."""
        self.deletes.append(ObjectRef(gvk, namespace or None, name))
        return self

    def status(self, status: Any) -> "Outcome":
        """The primary's new status (the value of its `status` field, a JSON object)."""
        self.new_status = status
        return self

    def event(self, *events: Event) -> "Outcome":
        self.events.extend(events)
        return self

    def requeue_after(self, ms: float) -> "Outcome":
        """Reconcile again after this many milliseconds even if nothing changes."""
        self.requeue_ms = max(0, int(-(-ms // 1)))
        return self


class FinalizeOutcome:
    """What finalize decided for a primary being deleted; build it by chaining. Done by default:
    the host makes the deletions, removes its finalizer and the primary goes. `.wait()`: not yet
    (the host makes the deletions and calls finalize again when an owned object changes, or after
    `ms`)."""

    def __init__(self) -> None:
        self.deletes: List[ObjectRef] = []
        self.new_status: Optional[Any] = None
        self.events: List[Event] = []
        self.done = True
        self.requeue_ms: Optional[int] = None

    def delete(self, gvk: GVK, namespace: Optional[str], name: str) -> "FinalizeOutcome":
        """An object to delete (only objects this primary controls); namespace None: the primary's."""
        self.deletes.append(ObjectRef(gvk, namespace or None, name))
        return self

    def status(self, status: Any) -> "FinalizeOutcome":
        """The primary's new status (the value of its `status` field)."""
        self.new_status = status
        return self

    def event(self, *events: Event) -> "FinalizeOutcome":
        self.events.extend(events)
        return self

    def wait(self, ms: Optional[float] = None) -> "FinalizeOutcome":
        """Not done yet: finalize again after ms milliseconds (None: when an owned object changes,
        or after the host's 5 s)."""
        self.done = False
        self.requeue_ms = None if ms is None else max(0, int(-(-ms // 1)))
        return self


@dataclass(frozen=True)
class Violation:
    """Why an object is refused: the field at fault (a path like `spec.deploymentName`) if there is
    one, and what is wrong (kubectl prints it)."""

    message: str
    field: Optional[str] = None


class Refused(Exception):
    """Raised by validate to refuse the object with these violations (at least one)."""

    def __init__(self, *violations: Violation):
        if not violations:
            raise ValueError("kwop.Refused needs at least one Violation")
        super().__init__("; ".join(("%s: %s" % (v.field, v.message)) if v.field else v.message for v in violations))
        self.violations: List[Violation] = list(violations)


def refuse(message: str, field: Optional[str] = None) -> Refused:
    """A refusal with one violation: `raise kwop.refuse("is required", field="spec.name")`."""
    return Refused(Violation(message, field))


@dataclass
class Admission:
    """One admission request for a primary: operation "create" or "update", the object as it would
    be stored, on update the stored one (`old`), who asks, whether it is a dry run, its instant."""

    operation: Literal["create", "update"]
    object: Any
    old: Optional[Any]
    user: str
    dry_run: bool
    now: datetime


def _field(o: Any, key: str) -> Any:
    try:
        return o.get(key)
    except AttributeError:
        return None


class Cache(Protocol):
    """The host's read-only caches, as JSON text (the `cache` import, or a FakeCache)."""

    def get(self, gvk: GVK, namespace: Optional[str], name: str) -> Optional[str]: ...

    def query(self, gvk: GVK, namespace: Optional[str], label_selector: Optional[str]) -> List[str]: ...


Level = Literal["trace", "debug", "info", "warn", "error"]


class Logger:
    """The host's log (tagged with the plugin and the object)."""

    def __init__(self, sink: Callable[[Level, str], None]):
        self._sink = sink

    def debug(self, message: str) -> None:
        self._sink("debug", message)

    def info(self, message: str) -> None:
        self._sink("info", message)

    def warn(self, message: str) -> None:
        self._sink("warn", message)

    def error(self, message: str) -> None:
        self._sink("error", message)


class Recorder:
    """Events of one reconcile, like client-go's recorder (the object is the primary)."""

    def __init__(self) -> None:
        self.events: List[Event] = []

    def event(self, type: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        self.events.append(warning(reason, message) if type == "Warning" else normal(reason, message))


class Context:
    """What a reconcile can look at besides its primary."""

    def __init__(self, owned: List[str], cache: Cache, json: Any, log: Logger, now: Optional[datetime] = None):
        self._owned, self._cache, self._json = owned, cache, json
        self.recorder = Recorder()
        self.log = log
        #: The call's instant (`request.now`, UTC): what a condition's lastTransitionTime should say.
        self.now: datetime = now or datetime.now(timezone.utc)

    def now_rfc3339(self) -> str:
        """The call's instant as metav1.Time writes it."""
        return self.now.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _parse(self, text: str, what: str) -> Any:
        try:
            return self._json.loads(text)
        except Exception as e:  # noqa: BLE001 - any codec's error
            raise retryable("%s from the cache is not JSON: %s" % (what, e)) from None

    def get(self, gvk: GVK, namespace: Optional[str], name: str) -> Optional[Any]:
        """One object from the host's cache, parsed, or None. namespace None: the primary's."""
        text = self._cache.get(gvk, namespace or None, name)
        return None if text is None else self._parse(text, "%s %s/%s" % (gvk.kind, namespace, name))

    def query(self, gvk: GVK, namespace: Optional[str] = None, label_selector: Optional[str] = None) -> List[Any]:
        """Objects of a kind in a namespace (None: all) matching a label selector (None: all)."""
        return [self._parse(t, gvk.kind) for t in self._cache.query(gvk, namespace or None, label_selector or None)]

    def owned(self, gvk: GVK) -> List[Any]:
        """The objects of one kind the primary controls (from the request)."""
        objs = [self._json.loads(t) for t in self._owned]
        return [o for o in objs if _field(o, "apiVersion") == gvk.api_version and _field(o, "kind") == gvk.kind]


class Reconciler:
    """A plugin: subclass it (or write any object with these methods). finalize and validate have
    defaults (done at once; allow everything) and are called only when Info says so."""

    def info(self) -> Info:
        raise NotImplementedError

    def reconcile(self, primary: Any, ctx: Context) -> Optional[Outcome]:
        raise NotImplementedError

    def finalize(self, primary: Any, ctx: Context) -> Optional[FinalizeOutcome]:
        """Cleans up for a primary being deleted (Info(finalizes=True)); None: done."""
        return FinalizeOutcome()

    def validate(self, req: Admission, ctx: Context) -> Optional[List[str]]:
        """Checks a primary before it is stored (Info(validates=True)): returns warnings (None: none),
        raises kwop.Refused / kwop.refuse(...) to refuse."""
        return []


@dataclass
class Result:
    """What the host gets from one reconcile or finalize (run() and the component share this code).
    `done` is finalize's (always True for reconcile)."""

    apply: List[str] = field(default_factory=list)
    delete: List[ObjectRef] = field(default_factory=list)
    status: Optional[str] = None
    events: List[Event] = field(default_factory=list)
    requeue_after_ms: Optional[int] = None
    failure: Optional[Failure] = None
    log: List[tuple] = field(default_factory=list)
    done: bool = True


@dataclass
class Verdict:
    """What the host gets from one validate: warnings when allowed, violations when refused."""

    warnings: List[str] = field(default_factory=list)
    violations: List[Violation] = field(default_factory=list)
    log: List[tuple] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.violations


class PluginError(Exception):
    """An exception in validate (not a refusal): the call fails with `message` (the exception and
    its traceback) and the webhook's failurePolicy decides."""

    def __init__(self, message: str, cause: BaseException):
        super().__init__(message)
        self.message, self.cause = message, cause


_HERE = os.path.dirname(os.path.abspath(__file__))


def describe(e: BaseException) -> str:
    """An exception as a failure message: `Type: message` first (what an event shows), then the
    traceback without kwop's own frames; in the component, files of the plugin's folder are named
    `src/<file>` (not the build's staging folder)."""
    frames = traceback.extract_tb(e.__traceback__)
    while frames and os.path.abspath(frames[0].filename) == os.path.abspath(__file__):
        frames = traceback.StackSummary.from_list(frames[1:])
    if sys.platform == "wasi":
        for f in frames:
            if os.path.dirname(f.filename) == _HERE:
                f.filename = "src/" + os.path.basename(f.filename)
    head = "".join(traceback.format_exception_only(type(e), e)).strip()
    stack = "".join(traceback.format_list(frames)).rstrip()
    return "%s\nTraceback (most recent call last):\n%s" % (head, stack) if stack else head


def _call(plugin: Reconciler, method: str, primary: str, owned: List[str], cache: Cache, json: Any,
          sink: Callable[[Level, str], None], now: Optional[datetime]) -> Result:
    """reconcile or finalize, with every failure as Result.failure (none escapes)."""
    res = Result()
    try:
        obj = json.loads(primary)
    except Exception as e:  # noqa: BLE001
        res.failure = permanent("the primary object does not parse: %s" % e)
        return res
    ctx = Context(owned, cache, json, Logger(sink), now)
    want = Outcome if method == "reconcile" else FinalizeOutcome
    try:
        out = getattr(plugin, method)(obj, ctx)
        if out is None:
            out = want()
        if not isinstance(out, want):
            raise permanent("%s must return a kwop.%s, not %s" % (method, want.__name__, type(out).__name__))
        res.apply = [json.dumps(o) for o in getattr(out, "intents", [])]
        res.status = None if out.new_status is None else json.dumps(out.new_status)
        res.delete, res.requeue_after_ms = out.deletes, out.requeue_ms
        res.done = getattr(out, "done", True)
        res.events = ctx.recorder.events + out.events
    except Failure as f:
        res.failure = f
    except Exception as e:  # noqa: BLE001 - a bug in the plugin: retried, with its traceback
        res.failure = retryable(describe(e))
    if res.failure is not None:
        res.apply, res.delete, res.status, res.requeue_after_ms = [], [], None, None
        res.events = ctx.recorder.events + res.failure.events
    return res


def _reconcile(plugin: Reconciler, primary: str, owned: List[str], cache: Cache, json: Any,
               sink: Callable[[Level, str], None], now: Optional[datetime] = None) -> Result:
    return _call(plugin, "reconcile", primary, owned, cache, json, sink, now)


def _finalize(plugin: Reconciler, primary: str, owned: List[str], cache: Cache, json: Any,
              sink: Callable[[Level, str], None], now: Optional[datetime] = None) -> Result:
    return _call(plugin, "finalize", primary, owned, cache, json, sink, now)


def _validate(plugin: Reconciler, operation: str, obj: str, old: Optional[str], user: str, dry_run: bool,
              cache: Cache, json: Any, sink: Callable[[Level, str], None], now: Optional[datetime] = None) -> Verdict:
    """validate; a refusal is Verdict.violations, any other exception raises PluginError."""
    res = Verdict()
    ctx = Context([], cache, json, Logger(sink), now)
    try:
        req = Admission(operation, json.loads(obj), None if old is None else json.loads(old), user, dry_run, ctx.now)  # type: ignore[arg-type]
        warnings = plugin.validate(req, ctx)
        if warnings is None:
            warnings = []
        if isinstance(warnings, str) or not all(isinstance(w, str) for w in warnings):
            raise TypeError("validate must return a list of warning strings (or None), not %r" % (warnings,))
        res.warnings = list(warnings)
    except Refused as r:
        res.violations = r.violations
    except Exception as e:  # noqa: BLE001 - not a refusal: the call fails, with the message
        raise PluginError(describe(e), e) from None
    return res


def _instant(now: Any) -> datetime:
    return datetime.fromtimestamp(now.seconds, timezone.utc).replace(microsecond=now.nanoseconds // 1000)


def export(plugin: Reconciler, json: Any = _json) -> type:
    """The `WitWorld` class componentize-py calls, for plugin (assign it: `WitWorld = kwop.export(...)`).
    The world is the one the bindings were generated from: 0.2 (wit/v0.2) or 0.1 (wit/)."""
    import wit_world  # the bindings componentize-py generates from the WIT
    from componentize_py_types import Err
    from wit_world.imports import cache as wit_cache
    from wit_world.imports import log as wit_log
    from wit_world.imports import types

    v2 = hasattr(types, "OwnedKind")

    def wit_gvk(g: GVK) -> Any:
        return types.Gvk(group=g.group, version=g.version, kind=g.kind)

    def wit_events(events: List[Event]) -> List[Any]:
        return [types.Event(severity=types.EventType.WARNING if e.severity == "warning" else types.EventType.NORMAL,
                            reason=e.reason, message=e.message) for e in events]

    def wit_refs(refs: List[ObjectRef]) -> List[Any]:
        return [types.ObjectRef(gvk=wit_gvk(d.gvk), namespace=d.namespace, name=d.name) for d in refs]

    class HostCache:
        def get(self, gvk: GVK, namespace: Optional[str], name: str) -> Optional[str]:
            return wit_cache.get(wit_gvk(gvk), namespace, name)

        def query(self, gvk: GVK, namespace: Optional[str], label_selector: Optional[str]) -> List[str]:
            return wit_cache.query(wit_gvk(gvk), namespace, label_selector)

    levels = {"trace": wit_log.Level.TRACE, "debug": wit_log.Level.DEBUG, "info": wit_log.Level.INFO,
              "warn": wit_log.Level.WARN, "error": wit_log.Level.ERROR}

    def sink(level: Level, m: str) -> None:
        wit_log.log(levels[level], m)

    def failed(r: Result) -> Any:
        assert r.failure is not None
        return Err(types.Failure(message=r.failure.message, events=wit_events(r.events), retry=r.failure.retry))

    class WitWorld(wit_world.WitWorld):  # type: ignore[misc, valid-type]
        def info(self) -> Any:
            i = plugin.info()
            owned = i.owned_kinds()
            if not v2:
                if i.finalizes or i.validates or any(o.across_namespaces for o in owned):
                    raise ValueError("finalizes, validates and across-namespaces need the 0.2 WIT (wit/v0.2); "
                                     "this plugin is built against 0.1")
                return types.PluginInfo(name=i.name, version=i.version, primary=wit_gvk(i.primary),
                                        owns=[wit_gvk(o.gvk) for o in owned], reads=[wit_gvk(g) for g in i.reads])
            return types.PluginInfo(
                name=i.name, version=i.version, primary=wit_gvk(i.primary),
                owns=[types.OwnedKind(kind=wit_gvk(o.gvk), across_namespaces=o.across_namespaces) for o in owned],
                reads=[wit_gvk(g) for g in i.reads], finalizes=i.finalizes, validates=i.validates)

        def reconcile(self, req: Any) -> Any:
            now = _instant(req.now) if v2 else None
            r = _reconcile(plugin, req.primary, list(req.owned), HostCache(), json, sink, now)
            if r.failure is not None:
                raise failed(r)
            return types.Outcome(apply=r.apply, delete=wit_refs(r.delete), status=r.status,
                                 events=wit_events(r.events), requeue_after_ms=r.requeue_after_ms)

        if v2:
            def finalize(self, req: Any) -> Any:
                r = _finalize(plugin, req.primary, list(req.owned), HostCache(), json, sink, _instant(req.now))
                if r.failure is not None:
                    raise failed(r)
                return types.FinalizeOutcome(delete=wit_refs(r.delete), status=r.status, events=wit_events(r.events),
                                             done=r.done, requeue_after_ms=None if r.done else r.requeue_after_ms)

            def validate(self, req: Any) -> Any:
                op = "update" if req.operation == types.Operation.UPDATE else "create"
                try:
                    v = _validate(plugin, op, req.object, req.old_object, req.user, req.dry_run, HostCache(), json,
                                  sink, _instant(req.now))
                except PluginError as e:
                    _fail_call(e)
                if v.violations:
                    raise Err([types.Violation(field=x.field, message=x.message) for x in v.violations])
                return v.warnings

    return WitWorld


def _fail_call(e: PluginError) -> None:
    """Ends the call as a failure (a trap), not an answer: the traceback goes to stderr, where the
    host reads the plugin's own message from (as it does for a Rust panic)."""
    tb = e.message.split("\n", 1)
    text = (tb[1] + "\n" + tb[0]) if len(tb) == 2 else "Traceback (most recent call last):\n" + tb[0]
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    os._exit(70)


class Condition(TypedDict, total=False):
    """metav1.Condition as it reads from and writes to JSON."""

    type: str
    status: Literal["True", "False", "Unknown"]
    observedGeneration: int
    lastTransitionTime: str
    reason: str
    message: str


def now_rfc3339() -> str:
    """The current time as metav1.Time writes it (the host's clock is the reconcile's)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_status_condition(conditions: List[Condition], c: Condition, now: Union[str, datetime, None] = None) -> bool:
    """k8s.io/apimachinery's meta.SetStatusCondition: lastTransitionTime changes only when the
    status does (to `now`: pass ctx.now, the call's instant). Returns whether anything changed."""
    if isinstance(now, datetime):
        now = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    existing = find_status_condition(conditions, c["type"])
    if existing is None:
        conditions.append({**c, "lastTransitionTime": c.get("lastTransitionTime") or now or now_rfc3339()})
        return True
    changed = False
    if existing.get("status") != c.get("status"):
        existing["status"] = c["status"]
        existing["lastTransitionTime"] = c.get("lastTransitionTime") or now or now_rfc3339()
        changed = True
    for k in ("reason", "message", "observedGeneration"):
        if existing.get(k) != c.get(k):
            if k in c:
                existing[k] = c[k]  # type: ignore[literal-required]
            else:
                existing.pop(k, None)  # type: ignore[misc]
            changed = True
    return changed


def find_status_condition(conditions: List[Condition], type: str) -> Optional[Condition]:
    return next((c for c in conditions if c.get("type") == type), None)


def generation(primary: Any) -> Optional[int]:
    """The primary's metadata.generation (what observedGeneration should say), if it has one."""
    g = (_field(primary, "metadata") or {}).get("generation")
    return g if isinstance(g, int) else None


def set_condition(status: Dict[str, Any], type: str, ok: Optional[bool], reason: str, message: str,
                  primary: Any = None, now: Union[str, datetime, None] = None) -> bool:
    """Sets one condition in status["conditions"] (ok None: Unknown) as set_status_condition does;
    with `primary`, the condition's and the status's observedGeneration are its generation.
    Returns whether anything changed: `status = foo.get("status") or {}; kwop.set_condition(status,
    "Ready", True, "Available", "3/3", foo, ctx.now); outcome.status(status)`."""
    c: Condition = {"type": type, "status": "Unknown" if ok is None else ("True" if ok else "False"),
                    "reason": reason, "message": message}
    changed = False
    g = generation(primary) if primary is not None else None
    if g is not None:
        c["observedGeneration"] = g
        changed = status.get("observedGeneration") != g
        status["observedGeneration"] = g
    conditions = status.setdefault("conditions", [])
    return set_status_condition(conditions, c, now) or changed
