"""Native unit tests of kwop plugins: run(), finalize() and validate() call a plugin as the
component does, over a FakeCache that answers as the host does (label selectors included), with a
fake log (Result.log). Not needed in the component.

    import kwop, kwop_testing
    r = kwop_testing.run(Plugin(), {"metadata": {...}, "spec": {...}}, kwop_testing.FakeCache([...]))
    assert r.failure is None and r.apply == [...]
    f = kwop_testing.finalize(Plugin(), deleted_foo)          # f.done, f.delete, f.failure
    v = kwop_testing.validate(Plugin(), foo, old=None)        # v.allowed, v.warnings, v.violations

An exception in validate that is not a refusal raises kwop.PluginError (the component fails the
call with its message).
"""

from __future__ import annotations

import json as _json
import re
from typing import Any, Callable, Dict, List, Optional

from datetime import datetime

from kwop import GVK, Cache, Reconciler, Result, Verdict, _finalize, _reconcile, _validate


def _text(v: Any) -> str:
    return v if isinstance(v, str) else _json.dumps(v)


def run(plugin: Reconciler, primary: Any, cache: Optional[Cache] = None, owned: Optional[List[Any]] = None,
        json: Any = _json, now: Optional[datetime] = None) -> Result:
    """One reconcile natively (unit tests): primary and owned as JSON text or Python values; now:
    the call's instant (ctx.now; default the current time)."""
    res_log: List[tuple] = []
    res = _reconcile(plugin, _text(primary), [_text(o) for o in owned or []], cache or FakeCache([]), json,
                     lambda level, m: res_log.append((level, m)), now)
    res.log = res_log
    return res


def finalize(plugin: Reconciler, primary: Any, cache: Optional[Cache] = None, owned: Optional[List[Any]] = None,
             json: Any = _json, now: Optional[datetime] = None) -> Result:
    """One finalize natively, as run() (Result.done: whether the cleanup is complete)."""
    res_log: List[tuple] = []
    res = _finalize(plugin, _text(primary), [_text(o) for o in owned or []], cache or FakeCache([]), json,
                    lambda level, m: res_log.append((level, m)), now)
    res.log = res_log
    return res


def validate(plugin: Reconciler, obj: Any, old: Any = None, cache: Optional[Cache] = None, user: str = "tester",
             dry_run: bool = False, json: Any = _json, now: Optional[datetime] = None) -> Verdict:
    """One admission natively: a CREATE of obj, or with `old` an UPDATE. Raises kwop.PluginError
    when validate raised something that is not a refusal."""
    res_log: List[tuple] = []
    res = _validate(plugin, "create" if old is None else "update", _text(obj), None if old is None else _text(old),
                    user, dry_run, cache or FakeCache([]), json, lambda level, m: res_log.append((level, m)), now)
    res.log = res_log
    return res


class FakeCache:
    """A cache over objects given in a test, answering as the host does (label selectors too)."""

    def __init__(self, objects: List[Any], namespace: str = ""):
        self._texts = [o if isinstance(o, str) else _json.dumps(o) for o in objects]
        self._objs = [_json.loads(t) for t in self._texts]
        self.namespace = namespace

    def _of(self, o: Any, gvk: GVK) -> bool:
        return o.get("apiVersion") == gvk.api_version and o.get("kind") == gvk.kind

    def get(self, gvk: GVK, namespace: Optional[str], name: str) -> Optional[str]:
        ns = namespace if namespace is not None else self.namespace
        for t, o in zip(self._texts, self._objs):
            m = o.get("metadata") or {}
            if self._of(o, gvk) and m.get("namespace", "") == ns and m.get("name") == name:
                return t
        return None

    def query(self, gvk: GVK, namespace: Optional[str], label_selector: Optional[str]) -> List[str]:
        sel = _parse_selector(label_selector or "")
        if sel is None:
            return []
        out = []
        for t, o in zip(self._texts, self._objs):
            m = o.get("metadata") or {}
            if self._of(o, gvk) and (namespace is None or m.get("namespace") == namespace) \
                    and all(r(m.get("labels") or {}) for r in sel):
                out.append(t)
        return out


_KEY = re.compile(r"^[A-Za-z0-9\-_./]{1,317}$")
_VALUE = re.compile(r"^[A-Za-z0-9\-_.]{0,63}$")


def _parse_selector(s: str) -> Optional[List[Callable[[Dict[str, str]], bool]]]:
    """A label selector as the host parses it (host/src/watch/selector.rs); None if invalid."""
    if not s.strip():
        return []
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return None
        elif ch == "," and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    if depth:
        return None
    parts.append(s[start:])
    reqs: List[Callable[[Dict[str, str]], bool]] = []
    for p in (p.strip() for p in parts):
        m = re.match(r"^(.*?)(!=|==|=)(.*)$", p)
        if p.startswith("!"):
            k = p[1:].strip()
            if not _KEY.match(k):
                return None
            reqs.append(lambda labels, k=k: k not in labels)
        elif m:
            k, op, v = m.group(1).strip(), m.group(2), m.group(3).strip()
            if not _KEY.match(k) or not _VALUE.match(v):
                return None
            reqs.append((lambda l, k=k, v=v: l.get(k) != v) if op == "!=" else (lambda l, k=k, v=v: l.get(k) == v))
        elif re.match(r"^\S+\s+(notin|in)\s*\(.*\)$", p):
            k, rest = p.split(None, 1)
            op = "notin" if rest.startswith("notin") else "in"
            vals = [v.strip() for v in rest[len(op):].strip()[1:-1].split(",")]
            if not _KEY.match(k) or not all(_VALUE.match(v) for v in vals):
                return None
            reqs.append((lambda l, k=k, vs=vals: l.get(k) in vs) if op == "in"
                        else (lambda l, k=k, vs=vals: l.get(k) not in vs))
        elif _KEY.match(p):
            reqs.append(lambda labels, k=p: k in labels)
        else:
            return None
    return reqs
