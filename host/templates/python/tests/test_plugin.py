"""Native unit tests of src/plugin.py, called as the component calls it (kwop_testing.run,
.finalize, .validate) over a fake cache and log that answer as the host does: ./test.sh
(python3 -m unittest discover -s tests)."""

import json
import os
import sys
import unittest
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import kwop  # noqa: E402
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
    return kwop_testing.run(plugin.Plugin(), primary, kwop_testing.FakeCache(list(objects), "default"),
                            now=datetime(2026, 1, 1, tzinfo=timezone.utc))


class ReconcileTest(unittest.TestCase):
    def test_declares_what_it_touches(self):
        info = plugin.Plugin().info()
        self.assertEqual(info.owns, [plugin.CONFIGMAP])
        self.assertEqual((info.finalizes, info.validates), (True, True))

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


class FinalizeTest(unittest.TestCase):
    def test_a_deleted_foo_takes_its_configmap_and_is_done(self):
        r = kwop_testing.finalize(plugin.Plugin(), foo({"deploymentName": "web"}))
        self.assertIsNone(r.failure)
        self.assertTrue(r.done)
        self.assertEqual(r.delete, [kwop.ObjectRef(plugin.CONFIGMAP, None, "example-info")])
        self.assertEqual(r.events, [kwop.normal("CleanedUp", "ConfigMap example-info deleted")])


class ValidateTest(unittest.TestCase):
    def test_a_foo_with_a_deployment_name_is_allowed(self):
        v = kwop_testing.validate(plugin.Plugin(), foo({"deploymentName": "web"}))
        self.assertEqual((v.allowed, v.warnings), (True, []))

    def test_a_foo_without_one_is_refused_on_the_field(self):
        v = kwop_testing.validate(plugin.Plugin(), foo({}), old=foo({"deploymentName": "web"}))
        self.assertFalse(v.allowed)
        self.assertEqual([x.field for x in v.violations], ["spec.deploymentName"])

    def test_many_replicas_are_warned_not_refused(self):
        v = kwop_testing.validate(plugin.Plugin(), foo({"deploymentName": "web", "replicas": 50}))
        self.assertEqual((v.allowed, v.warnings), (True, ["spec.replicas: 50 is a lot for an example"]))


if __name__ == "__main__":
    unittest.main()
