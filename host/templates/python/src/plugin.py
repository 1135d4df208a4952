"""The reconcile logic, on kwop's helper module (src/kwop.py): plain Python over dicts, so
`./test.sh` runs it natively with a fake cache (tests/test_plugin.py). src/app.py connects it to
the host.

A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap `<name>-info` that describes it.
"""

import kwop

FOO = kwop.GVK("samplecontroller.k8s.io", "v1alpha1", "Foo")
CONFIGMAP = kwop.GVK("", "v1", "ConfigMap")


class Plugin(kwop.Reconciler):
    def info(self) -> kwop.Info:
        # The host watches these kinds and lets the plugin write only what it `owns`.
        return kwop.Info("{{name}}", "0.1.0", FOO, owns=[CONFIGMAP], reads=[])

    def reconcile(self, foo: dict, ctx: kwop.Context) -> kwop.Outcome:
        """foo: the primary object (a dict). ctx.get(gvk, namespace, name) and ctx.query(...) read
        the host's cache (namespace None: the Foo's); ctx.log.debug(...) logs. Raise
        kwop.permanent(...) or kwop.retryable(...) when it cannot decide."""
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
