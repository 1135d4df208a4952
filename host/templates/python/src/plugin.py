"""The plugin's logic, on kwop's helper module (src/kwop.py): plain Python over dicts, so
`./test.sh` runs it natively with a fake cache and log (tests/test_plugin.py). src/app.py connects
it to the host.

A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap `<name>-info` that describes it
(reconcile); a Foo without spec.deploymentName is refused before it is stored (validate, when the
host serves admission); a deleted Foo's ConfigMap is removed by finalize before the Foo goes.
"""

import kwop

FOO = kwop.GVK("samplecontroller.k8s.io", "v1alpha1", "Foo")
CONFIGMAP = kwop.GVK("", "v1", "ConfigMap")


class Plugin(kwop.Reconciler):
    def info(self) -> kwop.Info:
        # The host watches these kinds and lets the plugin write only what it `owns`.
        # finalizes: the host keeps the finalizer kwop.dev/{{name}} on each Foo and calls finalize
        # when one is deleted; validates: a host serving admission calls validate first.
        return kwop.Info("{{name}}", "0.1.0", FOO, owns=[CONFIGMAP], reads=[], finalizes=True, validates=True)

    def reconcile(self, foo: dict, ctx: kwop.Context) -> kwop.Outcome:
        """foo: the primary object (a dict). ctx.get(gvk, namespace, name) and ctx.query(...) read
        the host's cache (namespace None: the Foo's); ctx.log.debug(...) logs; ctx.now is the
        call's instant. Raise kwop.permanent(...) or kwop.retryable(...) when it cannot decide."""
        name = foo["metadata"]["name"] + "-info"
        spec = foo.get("spec") or {}
        if not spec.get("deploymentName"):
            # A failure: nothing is written; permanent (no retry) waits until the Foo changes.
            message = "spec.deploymentName is required"
            raise kwop.permanent(message).event(kwop.warning("InvalidSpec", message))
        existing = ctx.get(CONFIGMAP, None, name)
        ctx.log.debug(("updating" if existing else "creating") + " ConfigMap " + name)
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},  # namespace: the Foo's; the owner reference is set by the host
            "data": {
                "foo": foo["metadata"]["name"],
                "deploymentName": spec["deploymentName"],
                "replicas": str(spec.get("replicas", 1)),  # ConfigMap data values are strings
            },
        }
        # .status({"availableReplicas": 1}) would be the value of `status`, not {"status": ...}
        return kwop.Outcome().apply(config_map).event(kwop.normal("Synced", "ConfigMap %s is up to date" % name))

    def finalize(self, foo: dict, ctx: kwop.Context) -> kwop.FinalizeOutcome:
        """The Foo is being deleted: clean up what the garbage collector would not (a record in an
        outside system, objects owned across namespaces), then return a FinalizeOutcome (done by
        default; .wait(ms) to be called again). Raising keeps the Foo, with a FinalizeFailed event."""
        name = foo["metadata"]["name"] + "-info"
        return (kwop.FinalizeOutcome()
                .delete(CONFIGMAP, None, name)
                .event(kwop.normal("CleanedUp", "ConfigMap %s deleted" % name)))

    def validate(self, req: kwop.Admission, ctx: kwop.Context) -> list:
        """Before the API server stores a Foo (req.operation "create" or "update", req.object, req.old):
        raise kwop.refuse(message, field=...) to refuse (kubectl prints it), return warnings to allow.
        An exception that is not a refusal is not a "no": the webhook's failurePolicy decides."""
        spec = req.object.get("spec") or {}
        if not spec.get("deploymentName"):
            raise kwop.refuse("is required: the name of the Deployment this Foo describes", field="spec.deploymentName")
        if spec.get("replicas", 1) > 10:
            return ["spec.replicas: %d is a lot for an example" % spec["replicas"]]
        return []
