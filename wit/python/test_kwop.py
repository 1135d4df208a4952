"""Unit tests of kwop.py and kwop_testing.py.

    python3 -m unittest discover -s wit/python
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kwop  # noqa: E402
from kwop_testing import FakeCache, run  # noqa: E402

CM = kwop.GVK("", "v1", "ConfigMap")
PRIMARY = {"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "generation": 3}, "spec": {"size": 2}}


class Widgets(kwop.Reconciler):
    def __init__(self, body):
        self.body = body

    def info(self):
        return kwop.Info("widgets", "1", kwop.GVK("example.com", "v1", "Widget"), owns=[CM])

    def reconcile(self, primary, ctx):
        return self.body(primary, ctx)


def mine(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns", "labels": {"app": "x"}}}


class KwopTest(unittest.TestCase):
    def test_an_outcome_crosses_as_json_text(self):
        def body(w, ctx):
            self.assertEqual(w["spec"]["size"], 2)
            ctx.recorder.event("Normal", "Sized", "size 2")
            return (kwop.Outcome().apply_as(CM, {"metadata": {"name": "w-size"}, "data": {"size": "2"}})
                    .delete(CM, "", "old").status({"size": 2}).event(kwop.warning("Odd", "odd")).requeue_after(1.5))

        r = run(Widgets(body), PRIMARY)
        self.assertIsNone(r.failure)
        self.assertEqual([json.loads(a) for a in r.apply],
                         [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w-size"}, "data": {"size": "2"}}])
        self.assertEqual(r.delete, [kwop.ObjectRef(CM, None, "old")])
        self.assertEqual(json.loads(r.status), {"size": 2})
        self.assertEqual(r.events, [kwop.normal("Sized", "size 2"), kwop.warning("Odd", "odd")])
        self.assertEqual(r.requeue_after_ms, 2)
        none = run(Widgets(lambda w, ctx: None), PRIMARY)
        self.assertEqual((none.apply, none.status, none.failure), ([], None, None))

    def test_failures_carry_the_recorded_events(self):
        for raised, retry in ((kwop.permanent("fix it").event(kwop.warning("Invalid", "fix it")), False),
                              (kwop.retryable("later"), True)):
            def body(w, ctx, raised=raised):
                ctx.recorder.event("Warning", "Recorded", "first")
                raise raised

            r = run(Widgets(body), PRIMARY)
            self.assertEqual((r.failure.message, r.failure.retry), (raised.message, retry))
            self.assertEqual(r.events, [kwop.warning("Recorded", "first")] + raised.events)
            self.assertEqual((r.apply, r.status), ([], None))

        r = run(Widgets(lambda w, ctx: {}["missing"]), PRIMARY)
        self.assertTrue(r.failure.retry)
        self.assertIn("KeyError: 'missing'", r.failure.message, "a Python error crosses with its traceback")
        self.assertFalse(run(Widgets(lambda w, ctx: {"apply": []}), PRIMARY).failure.retry)
        self.assertFalse(run(Widgets(lambda w, ctx: kwop.Outcome().apply({"metadata": {}})), PRIMARY).failure.retry)
        bad = run(Widgets(lambda w, ctx: None), "{")
        self.assertTrue(bad.failure.message.startswith("the primary object does not parse: "))
        self.assertFalse(bad.failure.retry)

    def test_the_context_reads_the_cache_and_the_owned_objects(self):
        other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "other", "labels": {"app": "x"}}}
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "ns"}}

        def body(w, ctx):
            self.assertEqual(ctx.get(CM, "ns", "a")["metadata"]["name"], "a")
            self.assertEqual(ctx.get(CM, None, "a")["metadata"]["name"], "a")
            self.assertIsNone(ctx.get(CM, "ns", "b"))
            self.assertEqual(len(ctx.query(CM, None, "app=x")), 2)
            self.assertEqual(len(ctx.query(CM, "ns", "app in (x, y)")), 1)
            self.assertEqual(len(ctx.query(CM, "ns", "app notin (x)")), 0)
            self.assertEqual(len(ctx.query(CM, "ns", "!app")), 0)
            self.assertEqual(ctx.query(CM, "ns", "app in ("), [], "an invalid selector matches nothing")
            self.assertEqual([o["metadata"]["name"] for o in ctx.owned(CM)], ["a"])
            ctx.log.warn("careful")

        r = run(Widgets(body), PRIMARY, FakeCache([mine("a"), other], namespace="ns"), owned=[mine("a"), deployment])
        self.assertIsNone(r.failure)
        self.assertEqual(r.log, [("warn", "careful")])

    def test_set_status_condition_keeps_the_transition_time_while_the_status_holds(self):
        conds = []
        self.assertTrue(kwop.set_status_condition(conds, {"type": "Ready", "status": "False", "reason": "Creating", "message": ""}, "t1"))
        self.assertTrue(kwop.set_status_condition(
            conds, {"type": "Ready", "status": "False", "reason": "Creating", "message": "1/3", "observedGeneration": 2}, "t2"))
        self.assertEqual(kwop.find_status_condition(conds, "Ready"),
                         {"type": "Ready", "status": "False", "reason": "Creating", "message": "1/3",
                          "observedGeneration": 2, "lastTransitionTime": "t1"})
        self.assertFalse(kwop.set_status_condition(
            conds, {"type": "Ready", "status": "False", "reason": "Creating", "message": "1/3", "observedGeneration": 2}, "t3"))
        self.assertTrue(kwop.set_status_condition(conds, {"type": "Ready", "status": "True", "reason": "Up", "message": ""}, "t4"))
        self.assertEqual(conds[0]["lastTransitionTime"], "t4")
        self.assertNotIn("observedGeneration", conds[0])
        kwop.set_status_condition(conds, {"type": "Other", "status": "True", "reason": "R", "message": ""})
        self.assertRegex(conds[1]["lastTransitionTime"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


if __name__ == "__main__":
    unittest.main()
