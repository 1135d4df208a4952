"""The WASM shell: the world's exports from wit/python/kwop.py (copied next to this file by
build.sh), foo.sync in the middle.

componentize-py generates the `wit_world` bindings from wit/v0.2/reconciler.wit at build time and
calls this module's `WitWorld` for the world's exports. jsonv is the JSON codec (numbers as the
Rust guest's serde_json sees them): kwop parses the request and the cache answers with it, and
prints the intents and the status with it.
"""

import kwop

import foo
import jsonv

DEPLOYMENTS = kwop.GVK("apps", "v1", "Deployment")


def _events(events):
    return [kwop.Event(e.severity, e.reason, e.message) for e in events]


class GuestFoo(kwop.Reconciler):
    def info(self) -> kwop.Info:
        return kwop.Info("guest-foo-py", "0.2.0", kwop.GVK("samplecontroller.k8s.io", "v1alpha1", "Foo"),
                         owns=[DEPLOYMENTS], validates=True)

    def reconcile(self, primary, ctx: kwop.Context) -> kwop.Outcome:
        # sample-controller's deploymentsLister.Deployments(ns).Get(name), from the host's cache.
        try:
            d = foo.sync(primary, lambda ns, name: ctx.get(DEPLOYMENTS, ns, name))
        except foo.Failure as f:
            raise kwop.Failure(f.message, retry=f.retry, events=_events(f.events)) from None
        return kwop.Outcome().apply(*d.apply).status(d.status).event(*_events(d.events))

    def validate(self, req: kwop.Admission, ctx: kwop.Context) -> list:
        # The same rules as the Rust guest's validate (guest-foo/src/foo.rs, `admit`).
        warnings, violations = foo.admit(req.object, req.old, lambda ns, name: ctx.get(DEPLOYMENTS, ns, name))
        if violations:
            raise kwop.Refused(*(kwop.Violation(message, field) for field, message in violations))
        return warnings


try:
    import wit_world  # noqa: F401  the bindings componentize-py generates (only in the build)
except ImportError:  # natively (tests/test_admission.py): GuestFoo alone
    pass
else:
    WitWorld = kwop.export(GuestFoo(), json=jsonv)
