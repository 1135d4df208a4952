"""Native unit tests of src/plugin.py, called as the component calls it (kwop_testing.run) over a
fake cache that answers as the host does: ./test.sh (python3 -m unittest discover -s tests)."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import kwop_testing  # noqa: E402
import plugin  # noqa: E402


def foo(spec):
    return {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example", "namespace": "default", "uid": "u1"},
        "spec": spec,
    }


def run(primary, objects=()):
    return kwop_testing.run(plugin.Plugin(), primary, kwop_testing.FakeCache(list(objects), "default"))


class ReconcileTest(unittest.TestCase):
    def test_declares_what_it_touches(self):
        self.assertEqual(plugin.Plugin().info().owns, [plugin.CONFIGMAP])

    def test_a_foo_gets_a_configmap_describing_it(self):
        r = run(foo({"deploymentName": "web", "replicas": 3}))
        self.assertIsNone(r.failure)
        cm = json.loads(r.apply[0])
        self.assertEqual(cm["metadata"]["name"], "example-info")
        self.assertEqual(cm["data"], {"foo": "example", "deploymentName": "web", "replicas": "3"})
        self.assertEqual(r.events[0].reason, "Synced")
        self.assertEqual(r.log, [("debug", "creating ConfigMap example-info")])

    def test_an_existing_configmap_is_updated_not_created(self):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "example-info", "namespace": "default"}}
        r = run(foo({"deploymentName": "web"}), [cm])
        self.assertEqual(r.log, [("debug", "updating ConfigMap example-info")])

    def test_a_foo_without_deployment_name_is_a_failure_not_retried(self):
        r = run(foo({}))
        self.assertFalse(r.failure.retry)
        self.assertEqual(r.events[0].reason, "InvalidSpec")


if __name__ == "__main__":
    unittest.main()
