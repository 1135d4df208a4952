"""Native unit tests of src/plugin.py with a fake cache and log: ./test.sh
(python3 -m unittest discover -s tests)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import plugin  # noqa: E402


class FakeHost:
    """`objects` is what the cache holds; every log line is kept in `logs`."""

    def __init__(self, objects=()):
        self.objects, self.logs = list(objects), []

    def get(self, gvk, namespace, name):
        for o in self.objects:
            m = o["metadata"]
            if o["kind"] == gvk[2] and m.get("namespace") == namespace and m["name"] == name:
                return o
        return None

    def log(self, level, message):
        self.logs.append("%s: %s" % (level, message))


def foo(spec):
    return {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example", "namespace": "default", "uid": "u1"},
        "spec": spec,
    }


class ReconcileTest(unittest.TestCase):
    def test_declares_what_it_touches(self):
        self.assertEqual(plugin.OWNS, [plugin.CONFIGMAP])

    def test_a_foo_gets_a_configmap_describing_it(self):
        host = FakeHost()
        out = plugin.reconcile(foo({"deploymentName": "web", "replicas": 3}), host)
        cm = out["apply"][0]
        self.assertEqual(cm["metadata"]["name"], "example-info")
        self.assertEqual(cm["data"], {"foo": "example", "deploymentName": "web", "replicas": "3"})
        self.assertEqual(out["events"][0][1], "Synced")
        self.assertEqual(host.logs, ["debug: creating ConfigMap example-info"])

    def test_an_existing_configmap_is_updated_not_created(self):
        cm = {"kind": "ConfigMap", "metadata": {"name": "example-info", "namespace": "default"}}
        host = FakeHost([cm])
        plugin.reconcile(foo({"deploymentName": "web"}), host)
        self.assertEqual(host.logs, ["debug: updating ConfigMap example-info"])

    def test_a_foo_without_deployment_name_is_a_failure_not_retried(self):
        with self.assertRaises(plugin.Failure) as f:
            plugin.reconcile(foo({}), FakeHost())
        self.assertFalse(f.exception.retry)
        self.assertEqual(f.exception.events[0][1], "InvalidSpec")


if __name__ == "__main__":
    unittest.main()
