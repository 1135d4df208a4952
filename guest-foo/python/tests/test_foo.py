"""Unit tests of foo.py (the same cases as guest-foo/src/foo/tests.rs).

    python3 -m unittest discover -s tests      (from guest-foo/python)
"""

import json
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "src"))
sys.path.insert(0, here)

import fixtures  # noqa: E402
import foo  # noqa: E402
import jsonv  # noqa: E402


def make_foo(deployment_name=None, replicas=None):
    spec = {}
    if deployment_name is not None:
        spec["deploymentName"] = deployment_name
    if replicas is not None:
        spec["replicas"] = replicas
    return jsonv.loads(
        json.dumps(
            {
                "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "kind": "Foo",
                "metadata": {"name": "test", "namespace": "default", "uid": "uid-foo"},
                "spec": spec,
            }
        )
    )


def deployment(owner_uid=None, available=None, controller=True):
    d = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "test", "namespace": "default"},
        "spec": {"replicas": 1},
    }
    if owner_uid is not None:
        d["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "kind": "Foo",
                "name": "test",
                "uid": owner_uid,
                "controller": controller,
                "blockOwnerDeletion": True,
            }
        ]
    if available is not None:
        d["status"] = {"availableReplicas": available}
    return d


def none(ns, name):
    return None


class SyncTest(unittest.TestCase):
    def test_creates_the_deployment_sample_controller_would(self):
        d = foo.sync(make_foo("test", 1), none)
        self.assertEqual(
            d.apply,
            [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "test", "namespace": "default"},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": "nginx", "controller": "test"}},
                        "template": {
                            "metadata": {"labels": {"app": "nginx", "controller": "test"}},
                            "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
                        },
                    },
                }
            ],
        )
        self.assertEqual(d.status, {"availableReplicas": 0})
        self.assertEqual(d.events, [foo.Event(foo.NORMAL, "Synced", "Foo synced successfully")])

    def test_unset_replicas_stay_unset(self):
        d = foo.sync(make_foo("test"), none)
        self.assertNotIn("replicas", d.apply[0]["spec"])

    def test_status_copies_available_replicas_of_the_owned_deployment(self):
        def found(ns, n):
            return deployment("uid-foo", 3) if (ns, n) == ("default", "test") else None

        self.assertEqual(foo.sync(make_foo("test", 3), found).status, {"availableReplicas": 3})

    def test_unowned_deployment_is_left_alone_and_reported(self):
        with self.assertRaises(foo.Failure) as c:
            foo.sync(make_foo("test", 1), lambda ns, n: deployment())
        f = c.exception
        self.assertTrue(f.retry)
        self.assertEqual(f.message, 'Resource "test" already exists and is not managed by Foo')
        self.assertEqual(f.events[0].reason, "ErrResourceExists")
        self.assertEqual(f.events[0].severity, foo.WARNING)

    def test_deployment_controlled_by_another_foo_is_not_ours(self):
        with self.assertRaises(foo.Failure):
            foo.sync(make_foo("test", 1), lambda ns, n: deployment("uid-other"))

    def test_non_controller_owner_reference_does_not_count(self):
        with self.assertRaises(foo.Failure):
            foo.sync(make_foo("test", 1), lambda ns, n: deployment("uid-foo", controller=False))

    def test_missing_or_empty_deployment_name_is_a_warning_without_retry(self):
        for f in [make_foo(None, 1), make_foo("", 1)]:
            with self.assertRaises(foo.Failure) as c:
                foo.sync(f, none)
            self.assertFalse(c.exception.retry)
            self.assertEqual(c.exception.events[0].reason, foo.INVALID_SPEC)
            self.assertEqual(c.exception.events[0].severity, foo.WARNING)

    def test_invalid_deployment_name_is_a_warning_without_retry(self):
        for bad in ["Has_Upper", "-lead", "trail-", "a..b", "x" * 254]:
            with self.assertRaises(foo.Failure, msg=bad) as c:
                foo.sync(make_foo(bad, 1), none)
            self.assertFalse(c.exception.retry)
            self.assertIn("not a valid Deployment name", c.exception.message)
        foo.sync(make_foo("a.b-c.d9", 1), none)
        self.assertEqual(foo.check_dns_subdomain("é" * 127), "must be no more than 253 characters")

    def test_garbage_foo_is_rejected_without_retry_in_serde_words(self):
        cases = {
            '{"spec":"nope"}': 'invalid type: string "nope", expected struct Spec',
            '{"spec":{"deploymentName":"x","replicas":2.0}}': "invalid type: floating point `2.0`, expected i64",
            '{"spec":{"deploymentName":"x","replicas":9223372036854775808}}': (
                "invalid value: integer `9223372036854775808`, expected i64"
            ),
            '{"spec":{"deploymentName":true}}': "invalid type: boolean `true`, expected a string",
        }
        for text, why in cases.items():
            with self.assertRaises(foo.Failure) as c:
                foo.sync(jsonv.loads(text), none)
            self.assertFalse(c.exception.retry)
            self.assertEqual(c.exception.message, "Foo does not parse: " + why)

    def test_strings_are_quoted_as_rust_debug_quotes_them(self):
        self.assertEqual(foo.debug_str('a"b\\c\n\t\r\0'), '"a\\"b\\\\c\\n\\t\\r\\0"')
        self.assertEqual(
            foo.debug_str("é\u0301\u200b\u00a0😀\u007f"), '"é\\u{301}\\u{200b}\\u{a0}😀\\u{7f}"'
        )

    def test_floats_are_read_and_written_as_serde_json_does(self):
        self.assertEqual(jsonv.format_float(1e16), "1e+16")
        self.assertEqual(jsonv.format_float(1e15), "1000000000000000.0")
        self.assertEqual(jsonv.format_float(1.5e-7), "1.5e-7")
        self.assertEqual(jsonv.format_float(0.00001), "0.00001")
        self.assertEqual(jsonv.format_float(-0.0), "-0.0")
        # Not the nearest f64: u64 significand, then one multiplication by 10^4.
        self.assertEqual(jsonv.format_float(jsonv.serde_f64("1.2345678901234567e+20")), "1.2345678901234568e+20")


class EdgeFixturesTest(unittest.TestCase):
    """The edge fixtures of the JS guest (expected outputs recorded from the Rust guest)."""

    def test_edge_fixtures(self):
        root = os.path.join(here, "..", "..", "js", "test", "edge-fixtures")
        if not os.path.isdir(root):
            self.skipTest("no %s" % root)
        for d in sorted(os.listdir(root)):
            got, expected, skipped = fixtures.run_fixture(os.path.join(root, d))
            if not skipped:
                self.assertEqual(got, expected, d)


if __name__ == "__main__":
    unittest.main()
