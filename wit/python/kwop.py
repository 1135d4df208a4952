"""kwop: write a kwop reconcile plugin in Python without the WIT plumbing, with type hints.

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

    WitWorld = kwop.export(Plugin())   # what componentize-py calls

`kwop_testing.run(Plugin(), primary, kwop_testing.FakeCache([...]))` runs the same code natively
for unit tests (kwop_testing.py, next to this file; not needed in the component).
Everything crosses to the host as JSON text (see wit/reconciler.wit); pass `json=` (an object with
`loads` and `dumps`) to `export`/`run` to use another codec than the standard library's.
"""

from __future__ import annotations

import json as _json
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Literal, Optional, Protocol, TypedDict


@dataclass(frozen=True)
class GVK:
    """A group/version/kind; the core group is ""."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass
class Info:
    """What the plugin is and what it may touch (the host watches exactly these kinds)."""

    name: str
    version: str
    primary: GVK
    owns: List[GVK] = field(default_factory=list)
    reads: List[GVK] = field(default_factory=list)


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

    def __init__(self, owned: List[str], cache: Cache, json: Any, log: Logger):
        self._owned, self._cache, self._json = owned, cache, json
        self.recorder = Recorder()
        self.log = log

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
    """A plugin: subclass it, or write any object with these two methods."""

    def info(self) -> Info:
        raise NotImplementedError

    def reconcile(self, primary: Any, ctx: Context) -> Optional[Outcome]:
        raise NotImplementedError


@dataclass
class Result:
    """What the host gets from one reconcile (run() and the component share this code)."""

    apply: List[str] = field(default_factory=list)
    delete: List[ObjectRef] = field(default_factory=list)
    status: Optional[str] = None
    events: List[Event] = field(default_factory=list)
    requeue_after_ms: Optional[int] = None
    failure: Optional[Failure] = None
    log: List[tuple] = field(default_factory=list)


def _reconcile(plugin: Reconciler, primary: str, owned: List[str], cache: Cache, json: Any,
               sink: Callable[[Level, str], None]) -> Result:
    res = Result()
    try:
        obj = json.loads(primary)
    except Exception as e:  # noqa: BLE001
        res.failure = permanent("the primary object does not parse: %s" % e)
        return res
    ctx = Context(owned, cache, json, Logger(sink))
    try:
        out = plugin.reconcile(obj, ctx)
        if out is None:
            out = Outcome()
        if not isinstance(out, Outcome):
            raise permanent("reconcile must return a kwop.Outcome, not %s" % type(out).__name__)
        res.apply = [json.dumps(o) for o in out.intents]
        res.status = None if out.new_status is None else json.dumps(out.new_status)
        res.delete, res.requeue_after_ms = out.deletes, out.requeue_ms
        res.events = ctx.recorder.events + out.events
    except Failure as f:
        res.failure = f
    except Exception:  # noqa: BLE001 - a bug in the plugin: retried, with its traceback
        res.failure = retryable(traceback.format_exc().strip())
    if res.failure is not None:
        res.apply, res.delete, res.status, res.requeue_after_ms = [], [], None, None
        res.events = ctx.recorder.events + res.failure.events
    return res


def export(plugin: Reconciler, json: Any = _json) -> type:
    """The `WitWorld` class componentize-py calls, for plugin (assign it: `WitWorld = kwop.export(...)`)."""
    import wit_world  # the bindings componentize-py generates from the WIT
    from componentize_py_types import Err
    from wit_world.imports import cache as wit_cache
    from wit_world.imports import log as wit_log
    from wit_world.imports import types

    def wit_gvk(g: GVK) -> Any:
        return types.Gvk(group=g.group, version=g.version, kind=g.kind)

    def wit_events(events: List[Event]) -> List[Any]:
        return [types.Event(severity=types.EventType.WARNING if e.severity == "warning" else types.EventType.NORMAL,
                            reason=e.reason, message=e.message) for e in events]

    class HostCache:
        def get(self, gvk: GVK, namespace: Optional[str], name: str) -> Optional[str]:
            return wit_cache.get(wit_gvk(gvk), namespace, name)

        def query(self, gvk: GVK, namespace: Optional[str], label_selector: Optional[str]) -> List[str]:
            return wit_cache.query(wit_gvk(gvk), namespace, label_selector)

    levels = {"trace": wit_log.Level.TRACE, "debug": wit_log.Level.DEBUG, "info": wit_log.Level.INFO,
              "warn": wit_log.Level.WARN, "error": wit_log.Level.ERROR}

    class WitWorld(wit_world.WitWorld):
        def info(self) -> Any:
            i = plugin.info()
            return types.PluginInfo(name=i.name, version=i.version, primary=wit_gvk(i.primary),
                                    owns=[wit_gvk(g) for g in i.owns], reads=[wit_gvk(g) for g in i.reads])

        def reconcile(self, req: Any) -> Any:
            r = _reconcile(plugin, req.primary, list(req.owned), HostCache(), json,
                           lambda level, m: wit_log.log(levels[level], m))
            if r.failure is not None:
                raise Err(types.Failure(message=r.failure.message, events=wit_events(r.events), retry=r.failure.retry))
            return types.Outcome(
                apply=r.apply,
                delete=[types.ObjectRef(gvk=wit_gvk(d.gvk), namespace=d.namespace, name=d.name) for d in r.delete],
                status=r.status, events=wit_events(r.events), requeue_after_ms=r.requeue_after_ms)

    return WitWorld


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


def set_status_condition(conditions: List[Condition], c: Condition, now: Optional[str] = None) -> bool:
    """k8s.io/apimachinery's meta.SetStatusCondition: lastTransitionTime changes only when the
    status does. Returns whether anything changed."""
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
