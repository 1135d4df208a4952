"""The reconcile logic: plain Python, no WIT types, so `./test.sh` runs it natively with a fake
cache and log (tests/test_plugin.py). src/app.py connects it to the host.

A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap `<name>-info` that describes it.
"""

FOO = ("samplecontroller.k8s.io", "v1alpha1", "Foo")
CONFIGMAP = ("", "v1", "ConfigMap")

NAME = "{{name}}"
VERSION = "0.1.0"
PRIMARY = FOO
OWNS = [CONFIGMAP]  # what it creates: the host lets it write only these
READS = []  # kinds it only reads through the cache


class Failure(Exception):
    """A reconcile that could not decide: nothing is written; retry=False waits for a change."""

    def __init__(self, message, retry, events=()):
        super().__init__(message)
        self.message, self.retry, self.events = message, retry, list(events)


def reconcile(foo, host):
    """foo: the primary object (a dict). host: .get(gvk, namespace, name) -> dict or None and
    .log(level, message). Returns {"apply": [dicts], "status": dict or None, "events": [...]}."""
    name = foo["metadata"]["name"] + "-info"
    spec = foo.get("spec") or {}
    if not spec.get("deploymentName"):
        message = "spec.deploymentName is required"
        raise Failure(message, retry=False, events=[("warning", "InvalidSpec", message)])
    existing = host.get(CONFIGMAP, foo["metadata"].get("namespace"), name)
    host.log("debug", ("updating" if existing else "creating") + " ConfigMap " + name)
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
    return {
        "apply": [config_map],
        "status": None,  # e.g. {"availableReplicas": 1}: the value of `status`, not {"status": ...}
        "events": [("normal", "Synced", "ConfigMap %s is up to date" % name)],
    }
