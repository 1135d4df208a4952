"""Unit tests of kwop.py and kwop_testing.py.

    python3 -m unittest discover -s wit/python
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kwop  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

from kwop_testing import FakeCache, finalize, run, validate  # noqa: E402

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


class Lifecycle(kwop.Reconciler):
    """finalize and validate through user code that can fail."""

    def info(self):
        return kwop.Info("life", "1", kwop.GVK("example.com", "v1", "Widget"),
                         owns=[CM, kwop.across_namespaces(kwop.GVK("", "v1", "Secret"))], finalizes=True, validates=True)

    def reconcile(self, w, ctx):
        return kwop.Outcome().status({"at": ctx.now_rfc3339()})

    def finalize(self, w, ctx):
        mode = w["spec"].get("mode")
        if mode == "boom":
            raise RuntimeError("cleanup backend unavailable")
        if mode == "wait":
            return kwop.FinalizeOutcome().delete(CM, None, "w-size").wait(1500)
        if mode == "wrong":
            return kwop.Outcome()
        return kwop.FinalizeOutcome().delete(CM, "ns", "w-size").event(kwop.normal("CleanedUp", "gone"))

    def validate(self, req, ctx):
        size = req.object["spec"].get("size")
        if size == "boom":
            return {}["no-such-key"]
        if not isinstance(size, int):
            raise kwop.refuse("must be a number", field="spec.size")
        if req.old is not None and req.old["spec"]["size"] > size:
            return ["spec.size: shrinking from %d" % req.old["spec"]["size"]]
        ctx.log.info("%s by %s" % (req.operation, req.user))
        return None


def widget(**spec):
    return {**PRIMARY, "spec": spec}


class LifecycleTest(unittest.TestCase):
    def test_info_declares_finalizes_validates_and_kinds_across_namespaces(self):
        i = Lifecycle().info()
        self.assertEqual((i.finalizes, i.validates), (True, True))
        self.assertEqual([(o.gvk.kind, o.across_namespaces) for o in i.owned_kinds()], [("ConfigMap", False), ("Secret", True)])
        with self.assertRaises(TypeError):
            kwop.Info("x", "1", CM, owns=["ConfigMap"]).owned_kinds()
        self.assertEqual(kwop.Info("x", "1", CM).finalizes, False)

    def test_finalize_is_done_or_waits_and_its_errors_are_failures_with_the_message(self):
        r = finalize(Lifecycle(), widget())
        self.assertEqual((r.failure, r.done, r.delete), (None, True, [kwop.ObjectRef(CM, "ns", "w-size")]))
        self.assertEqual(r.events, [kwop.normal("CleanedUp", "gone")])
        r = finalize(Lifecycle(), widget(mode="wait"))
        self.assertEqual((r.done, r.requeue_after_ms, r.delete[0].namespace), (False, 1500, None))
        r = finalize(Lifecycle(), widget(mode="boom"))
        self.assertTrue(r.failure.retry)
        self.assertTrue(r.failure.message.startswith("RuntimeError: cleanup backend unavailable\nTraceback"), r.failure.message)
        self.assertIn("test_kwop.py", r.failure.message, "the stack names the plugin's file")
        self.assertNotIn("kwop.py\"", r.failure.message.replace("test_kwop.py", ""), "kwop's own frames are left out")
        self.assertIn("must return a kwop.FinalizeOutcome", finalize(Lifecycle(), widget(mode="wrong")).failure.message)
        self.assertTrue(finalize(Widgets(lambda w, ctx: None), PRIMARY).done, "the default finalize is done at once")

    def test_validate_allows_warns_refuses_and_fails_on_an_error(self):
        self.assertTrue(validate(Lifecycle(), widget(size=2)).allowed)
        self.assertEqual(validate(Lifecycle(), widget(size=2)).log, [("info", "create by tester")])
        v = validate(Lifecycle(), widget(size=1), old=widget(size=3))
        self.assertEqual((v.allowed, v.warnings), (True, ["spec.size: shrinking from 3"]))
        v = validate(Lifecycle(), widget(size="x"))
        self.assertEqual((v.allowed, v.violations), (False, [kwop.Violation("must be a number", "spec.size")]))
        with self.assertRaises(kwop.PluginError) as e:
            validate(Lifecycle(), widget(size="boom"))
        self.assertTrue(e.exception.message.startswith("KeyError: 'no-such-key'\nTraceback"), e.exception.message)
        self.assertTrue(validate(Widgets(lambda w, ctx: None), PRIMARY).allowed, "the default validate allows")
        with self.assertRaises(ValueError):
            kwop.Refused()

    def test_now_is_the_calls_instant_and_conditions_use_it(self):
        at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        self.assertEqual(json.loads(run(Lifecycle(), PRIMARY, now=at).status), {"at": "2026-01-02T03:04:05Z"})
        status = {}
        self.assertTrue(kwop.set_condition(status, "Ready", False, "Creating", "0/2", PRIMARY, at))
        self.assertEqual(status, {"observedGeneration": 3, "conditions": [
            {"type": "Ready", "status": "False", "reason": "Creating", "message": "0/2", "observedGeneration": 3,
             "lastTransitionTime": "2026-01-02T03:04:05Z"}]})
        self.assertFalse(kwop.set_condition(status, "Ready", False, "Creating", "0/2", PRIMARY, "later"))
        self.assertTrue(kwop.set_condition(status, "Ready", None, "Lost", "", None, "later"))
        self.assertEqual(status["conditions"][0]["status"], "Unknown")
        self.assertEqual(kwop.generation({"metadata": {}}), None)


if __name__ == "__main__":
    unittest.main()
