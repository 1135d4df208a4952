"""A Python plugin whose every export can fail the way user code does (tests/tests/lang_python.rs):
a Foo's spec.deploymentName picks the fault.

- "reconcile-raises": reconcile raises ValueError (a bug): a retried failure whose message is
  the exception, on the Warning event.
- "finalize-fails": finalize raises RuntimeError while the Foo is deleted: FinalizeFailed and
  the deletion waits; any other name deletes its ConfigMap and is done (a CleanedUp event).
- "validate-raises": validate raises RuntimeError (not a refusal): the webhook's failurePolicy
  decides, with the message. "validate-refuses": a refusal on spec.deploymentName.

Built by tests/src/python_plugins.rs with host/templates/python/build.sh and wit/python/kwop.py.
"""

import kwop

FOO = kwop.GVK("samplecontroller.k8s.io", "v1alpha1", "Foo")
CONFIGMAP = kwop.GVK("", "v1", "ConfigMap")


def fault(foo):
    return (foo.get("spec") or {}).get("deploymentName")


class Faults(kwop.Reconciler):
    def info(self):
        return kwop.Info("py-faults", "0.1.0", FOO, owns=[CONFIGMAP], finalizes=True, validates=True)

    def reconcile(self, foo, ctx):
        if fault(foo) == "reconcile-raises":
            raise ValueError("reconcile exploded in python: %s" % foo["metadata"]["name"])
        return kwop.Outcome().apply_as(CONFIGMAP, {"metadata": {"name": foo["metadata"]["name"] + "-py"},
                                                   "data": {"at": ctx.now_rfc3339()}})

    def finalize(self, foo, ctx):
        if fault(foo) == "finalize-fails":
            raise RuntimeError("cleanup backend unavailable")
        return (kwop.FinalizeOutcome().delete(CONFIGMAP, None, foo["metadata"]["name"] + "-py")
                .event(kwop.normal("CleanedUp", "python finalize done")))

    def validate(self, req, ctx):
        if fault(req.object) == "validate-raises":
            raise RuntimeError("validator lost its marbles")
        if fault(req.object) == "validate-refuses":
            raise kwop.refuse("python says no", field="spec.deploymentName")
        return []


WitWorld = kwop.export(Faults())
