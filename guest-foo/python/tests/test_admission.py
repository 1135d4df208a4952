"""guest-foo's validate natively, through kwop's helper as the component runs it (kwop_testing):
the same rules as the Rust guest (invalid, missing and foreign deploymentName refused; an update
leaving spec alone only warned)."""

import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "src"))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "wit", "python"))

import kwop  # noqa: E402
import kwop_testing  # noqa: E402

from app import GuestFoo  # noqa: E402


def plugin():
    return GuestFoo()


FIELD = "spec.deploymentName"


def foo(name=None, uid="", spec=None):
    s = {} if name is None else {"deploymentName": name}
    return {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "f", "namespace": "default", "uid": uid}, "spec": spec or s}


def deployment(owner_uid=None):
    meta = {"name": "web", "namespace": "default"}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "f",
                                    "uid": owner_uid, "controller": True}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


class AdmissionTest(unittest.TestCase):
    def test_info_says_it_validates(self):
        self.assertTrue(plugin().info().validates)

    def test_a_valid_foo_is_allowed(self):
        v = kwop_testing.validate(plugin(), foo("web"))
        self.assertEqual((v.allowed, v.warnings), (True, []))

    def test_missing_invalid_and_foreign_names_are_refused(self):
        cache = kwop_testing.FakeCache([deployment()], namespace="default")
        for f, message in (
            (foo(), "is required: the name of the Deployment this Foo manages"),
            (foo(""), "is required: the name of the Deployment this Foo manages"),
            (foo("Web_App"), '"Web_App" is not a valid Deployment name: must consist of lower case alphanumeric '
                             "characters, '-' or '.', and must start and end with an alphanumeric character"),
            (foo("web"), 'Deployment "web" already exists in namespace "default" and is not managed by this Foo; '
                         "choose another name"),
        ):
            v = kwop_testing.validate(plugin(), f, cache=cache)
            self.assertEqual(v.violations, [kwop.Violation(message, FIELD)], f)

    def test_its_own_deployment_is_fine_and_an_unchanged_spec_is_only_warned(self):
        own = kwop_testing.FakeCache([deployment("u1")], namespace="default")
        self.assertTrue(kwop_testing.validate(plugin(), foo("web", "u1"), old=foo("web", "u1"), cache=own).allowed)
        foreign = kwop_testing.FakeCache([deployment()], namespace="default")
        v = kwop_testing.validate(plugin(), foo("web", "u1"), old=foo("web", "u1"), cache=foreign)
        self.assertEqual(v.violations, [])
        self.assertEqual(len(v.warnings), 1)
        self.assertTrue(v.warnings[0].startswith(FIELD + ': Deployment "web" already exists'), v.warnings)
        v = kwop_testing.validate(plugin(), foo("web", "u1", {"deploymentName": "web", "replicas": 2}),
                                  old=foo("web", "u1"), cache=foreign)
        self.assertFalse(v.allowed, "a spec change is refused")


if __name__ == "__main__":
    unittest.main()
