// Package guest writes kwop reconcile plugins in standard Go (GOOS=wasip1, no TinyGo) without
// touching the WIT bindings: the host calls Reconcile with the primary object decoded into your
// type, you read the host's caches through typed listers, and you return an Outcome.
//
//	type Foo struct {
//		guest.TypeMeta   `json:",inline"`
//		guest.ObjectMeta `json:"metadata"`
//		Spec             FooSpec `json:"spec"`
//	}
//
//	type plugin struct{}
//
//	func (plugin) Info() guest.Info {
//		return guest.Info{Name: "my-plugin", Version: "0.1.0",
//			Primary: guest.GVK{Group: "example.com", Version: "v1", Kind: "Foo"},
//			Owns:    []guest.GVK{{Group: "apps", Version: "v1", Kind: "Deployment"}}}
//	}
//
//	func (plugin) Reconcile(foo *Foo, ctx *guest.Context) (*guest.Outcome, error) {
//		deployments := guest.NewLister[appsv1.Deployment](ctx, deploymentGVK)
//		d, err := deployments.Get(foo.Namespace, foo.Spec.DeploymentName)
//		if err != nil && !guest.IsNotFound(err) {
//			return nil, err // retried with backoff
//		}
//		...
//		ctx.Recorder.Event(guest.EventTypeNormal, "Synced", "Foo synced successfully")
//		return guest.NewOutcome().ApplyAs(deploymentGVK, intent).Status(status), nil
//	}
//
//	func init() { guest.Export[Foo](plugin{}) }
//	func main() {}
//
// Everything crosses to the host as JSON text (see wit/reconciler.wit), so any type that
// encoding/json handles works: your own narrow structs, or k8s.io/api types. Keep the decisions
// in plain functions over those types and test them with `go test` (natively: the SDK runs
// without WebAssembly too, see Run and FakeCache).
package guest

import (
	"fmt"
	"time"
)

// GVK is a group/version/kind; the core group is "" (ConfigMap is {"", "v1", "ConfigMap"}).
type GVK struct {
	Group   string
	Version string
	Kind    string
}

// APIVersion is the object's apiVersion: "group/version", or "version" for the core group.
func (g GVK) APIVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// String is "Kind.version.group", as kubectl writes it.
func (g GVK) String() string {
	if g.Group == "" {
		return g.Kind + "." + g.Version
	}
	return g.Kind + "." + g.Version + "." + g.Group
}

// Info says what a plugin is and what it may touch: the host watches exactly these kinds and
// lets the plugin write only what it owns (and its primary's status).
type Info struct {
	// Name is a DNS label (lowercase letters, digits, '-', at most 63 bytes). It names the field
	// manager (kwop-<name>), the finalizer (kwop.dev/<name>) and the controller in logs and metrics.
	Name string
	// Version is free text (semver recommended), shown in logs and metrics.
	Version string
	// Primary is the kind reconciled: one reconcile per object of this kind.
	Primary GVK
	// Owns lists the kinds the plugin creates and controls in the primary's namespace: the host
	// sets a controller owner reference to the primary, and a change to one reconciles it.
	Owns []GVK
	// OwnsAcrossNamespaces lists owned kinds whose objects may live in any namespace the plugin
	// is granted (or be cluster-scoped). The host tracks them by labels it sets (kwop.dev/owner-uid,
	// kwop.dev/plugin) instead of owner references; nothing deletes them but the plugin's
	// Finalize, so a plugin declaring one must set Finalizes.
	OwnsAcrossNamespaces []GVK
	// Reads lists other kinds the plugin may read from the cache (no triggers, no writes).
	Reads []GVK
	// Finalizes: the host adds the finalizer kwop.dev/<Name> to each primary and calls Finalize
	// (not Reconcile) once the primary is being deleted; the primary goes when Finalize says done.
	// The reconciler should implement Finalizer (without it, Finalize is done at once).
	Finalizes bool
	// Validates: a host serving admission asks Validate before the API server stores a primary
	// (CREATE, UPDATE). The reconciler should implement Validator (without it, all is allowed).
	Validates bool
}

// Reconciler is a plugin whose primary objects decode into P.
type Reconciler[P any] interface {
	// Info describes the plugin. It must be cheap and deterministic: the host calls it when it
	// loads the plugin.
	Info() Info
	// Reconcile decides what should change for one primary object that is not being deleted. A
	// returned error is a failure: a *Failure says whether to retry; any other error is retried
	// with backoff. A panic is caught by the SDK and is a retried failure whose message is the
	// panic's, with the stack. Nothing survives between calls (the host uses a fresh instance).
	Reconcile(primary *P, ctx *Context) (*Outcome, error)
}

// Finalizer is a Reconciler that cleans up when a primary is deleted (with Info.Finalizes).
type Finalizer[P any] interface {
	// Finalize is called instead of Reconcile while the primary is being deleted (its
	// DeletionTimestamp is set). Return Done() (with the deletions left to make) to let the
	// primary go, NotDone() to be called again. A returned error or a panic is a failure: the
	// deletion waits, the host records a Warning FinalizeFailed with its message and retries.
	Finalize(primary *P, ctx *Context) (*FinalizeOutcome, error)
}

// Validator is a Reconciler that checks primaries before the API server stores them (with
// Info.Validates).
type Validator[P any] interface {
	// Validate allows the object (nil error; warnings are printed by kubectl) or refuses it by
	// returning Violations (FieldViolation, Violations{...}): the API server answers the client
	// with them. Any other error, or a panic, is not a refusal: it fails the admission call, and
	// the webhook's failurePolicy decides (Fail refuses with the message, Ignore admits).
	Validate(req *AdmissionRequest[P], ctx *Context) (warnings []string, err error)
}

// exported is the reconciler registered with Export, as the type-erased plugin the glue calls.
var exported plugin

type plugin interface {
	info() Info
	reconcile(primary string, owned []string, now time.Time, cache Cache) (wireOutcome, *Failure)
	finalize(primary string, owned []string, now time.Time, cache Cache) (wireOutcome, bool, *Failure)
	validate(in admissionInput, cache Cache) ([]string, []Violation, *ValidateError)
}

type typed[P any] struct{ r Reconciler[P] }

func (t typed[P]) info() Info { return t.r.Info() }

func (t typed[P]) reconcile(primary string, owned []string, now time.Time, cache Cache) (wireOutcome, *Failure) {
	return run(t.r, primary, owned, now, cache)
}

func (t typed[P]) finalize(primary string, owned []string, now time.Time, cache Cache) (wireOutcome, bool, *Failure) {
	return runFinalize(t.r, primary, owned, now, cache)
}

func (t typed[P]) validate(in admissionInput, cache Cache) ([]string, []Violation, *ValidateError) {
	return runValidate(t.r, in, cache)
}

// Export registers the plugin's reconciler. Call it once, from an init function of package main
// (a plugin's main function never runs: the host calls the exports directly).
func Export[P any](r Reconciler[P]) {
	if exported != nil {
		panic("kwop guest: Export called twice")
	}
	exported = typed[P]{r}
	bind()
}

// newContext is the Context of one reconcile or finalize over primary.
func newContext(primary string, owned []string, now time.Time, cache Cache) *Context {
	ctx := &Context{Cache: cache, Now: now.UTC(), owned: owned, primary: primary}
	var pm struct {
		Metadata ObjectMeta `json:"metadata"`
	}
	if decode(primary, &pm) == nil {
		ctx.Generation = pm.Metadata.Generation
	}
	return ctx
}

// run is one reconcile, the same natively and in the component.
func run[P any](r Reconciler[P], primary string, owned []string, now time.Time, cache Cache) (wireOutcome, *Failure) {
	var p P
	if err := decode(primary, &p); err != nil {
		return wireOutcome{}, Permanent(fmt.Sprintf("the primary object does not parse: %v", err))
	}
	ctx := newContext(primary, owned, now, cache)
	var out *Outcome
	var err error
	if pan := catch(func() { out, err = r.Reconcile(&p, ctx) }); pan != nil {
		return wireOutcome{}, pan.failure(ctx.Recorder.events)
	}
	if err != nil {
		f := asFailure(err)
		f.Events = append(ctx.Recorder.events, f.Events...)
		return wireOutcome{}, f
	}
	if out == nil {
		out = NewOutcome()
	}
	w, err := out.wire()
	if err != nil {
		return wireOutcome{}, Permanent(err.Error())
	}
	w.events = append(ctx.Recorder.events, w.events...)
	if err := checkEvents(w.events); err != nil {
		return wireOutcome{}, Permanent(err.Error())
	}
	return w, nil
}
