"""The WASM shell: WIT values in, plugin.reconcile in the middle, WIT values out.

componentize-py generates the `wit_world` package from wit/reconciler.wit at build time and calls
this module's class `WitWorld` (that exact name) for the world's exports. WIT in Python: records
are dataclasses with snake_case fields (`requeue-after-ms` is `requeue_after_ms`), enums are
`types.EventType.NORMAL`, `option<T>` is T or None, `json` is a str of JSON text (json.dumps),
and `result<outcome, failure>` is "return the Outcome, raise Err(Failure)".
`./build.sh bindings` writes the generated package to bindings/ for your editor.
"""

import json

import wit_world
from componentize_py_types import Err
from wit_world.imports import cache, log, types

import plugin

_LEVELS = {
    "debug": log.Level.DEBUG,
    "info": log.Level.INFO,
    "warn": log.Level.WARN,
    "error": log.Level.ERROR,
}
_SEVERITY = {"normal": types.EventType.NORMAL, "warning": types.EventType.WARNING}


def _gvk(t):
    return types.Gvk(group=t[0], version=t[1], kind=t[2])


class _Host:
    def get(self, gvk, namespace, name):
        text = cache.get(_gvk(gvk), namespace, name)
        return None if text is None else json.loads(text)

    def log(self, level, message):
        log.log(_LEVELS[level], str(message))


def _events(events, where):
    out = []
    for i, e in enumerate(events):
        if not (isinstance(e, tuple) and len(e) == 3 and e[0] in _SEVERITY):
            raise TypeError("%s[%d]: expected a tuple (severity, reason, message) with severity "
                            "'normal' or 'warning', got %r" % (where, i, e))
        out.append(types.Event(severity=_SEVERITY[e[0]], reason=str(e[1]), message=str(e[2])))
    return out


def _json(value, where):
    if not isinstance(value, dict):
        raise TypeError("%s: expected a dict (it is sent as JSON text), got %s" % (where, type(value).__name__))
    return json.dumps(value)


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.PluginInfo:
        return types.PluginInfo(
            name=plugin.NAME,
            version=plugin.VERSION,
            primary=_gvk(plugin.PRIMARY),
            owns=[_gvk(g) for g in plugin.OWNS],
            reads=[_gvk(g) for g in plugin.READS],
        )

    def reconcile(self, req: types.Request) -> types.Outcome:
        try:
            out = plugin.reconcile(json.loads(req.primary), _Host())
        except plugin.Failure as f:
            raise Err(types.Failure(message=f.message, events=_events(f.events, "Failure.events"), retry=f.retry))
        status = out.get("status")
        return types.Outcome(
            apply=[_json(o, "apply[%d]" % i) for i, o in enumerate(out.get("apply", []))],
            delete=[],
            status=None if status is None else _json(status, "status"),
            events=_events(out.get("events", []), "events"),
            requeue_after_ms=None,
        )
