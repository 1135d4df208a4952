"""The WASM shell: WIT types in, foo.sync in the middle, WIT types out.

componentize-py generates the `wit_world` bindings from wit/reconciler.wit at build time and
calls this module's `WitWorld` for the world's exports; raising `Err(failure)` returns the `err`
of a `result`.
"""

import wit_world
from componentize_py_types import Err
from wit_world.imports import cache, log, types

import foo
import jsonv


def _deployment_gvk():
    return types.Gvk(group="apps", version="v1", kind="Deployment")


def _to_wit(events):
    return [
        types.Event(
            severity=types.EventType.NORMAL if e.severity == foo.NORMAL else types.EventType.WARNING,
            reason=e.reason,
            message=e.message,
        )
        for e in events
    ]


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.PluginInfo:
        return types.PluginInfo(
            name="guest-foo-py",
            version="0.1.0",
            primary=types.Gvk(group="samplecontroller.k8s.io", version="v1alpha1", kind="Foo"),
            owns=[_deployment_gvk()],
            reads=[],
        )

    def reconcile(self, req: types.Request) -> types.Outcome:
        try:
            primary = jsonv.loads(req.primary)
        except jsonv.JsonError as e:
            raise Err(types.Failure(message="primary is not JSON: %s" % e, events=[], retry=False))

        # sample-controller's deploymentsLister.Deployments(ns).Get(name), from the host's cache.
        def lookup(ns, name):
            text = cache.get(_deployment_gvk(), ns, name)
            if text is None:
                return None
            try:
                return jsonv.loads(text)
            except jsonv.JsonError as e:
                log.log(log.Level.ERROR, "cached Deployment %s/%s is not JSON: %s" % (ns, name, e))
                return None

        try:
            d = foo.sync(primary, lookup)
        except foo.Failure as f:
            raise Err(types.Failure(message=f.message, events=_to_wit(f.events), retry=f.retry))
        return types.Outcome(
            apply=[jsonv.dumps(a) for a in d.apply],
            delete=[],
            status=jsonv.dumps(d.status),
            events=_to_wit(d.events),
            requeue_after_ms=None,
        )
