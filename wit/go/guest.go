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

import "fmt"

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
// lets the plugin write only what it Owns (and its primary's status).
type Info struct {
	// Name is a DNS label (lowercase letters, digits, '-', at most 63 bytes). It names the field
	// manager (kwop-<name>) and the controller in logs and metrics.
	Name string
	// Version is free text (semver recommended), shown in logs and metrics.
	Version string
	// Primary is the kind reconciled: one reconcile per object of this kind.
	Primary GVK
	// Owns lists the kinds the plugin creates and controls; a change to one the primary controls
	// triggers the primary's reconcile.
	Owns []GVK
	// Reads lists other kinds the plugin may read from the cache (no triggers, no writes).
	Reads []GVK
}

// Reconciler is a plugin whose primary objects decode into P.
type Reconciler[P any] interface {
	// Info describes the plugin. It must be cheap and deterministic: the host calls it when it
	// loads the plugin.
	Info() Info
	// Reconcile decides what should change for one primary object. A returned error is a
	// failure: a *Failure says whether to retry; any other error is retried with backoff.
	// Nothing survives between calls (the host uses a fresh instance for each).
	Reconcile(primary *P, ctx *Context) (*Outcome, error)
}

// exported is the reconciler registered with Export, as the type-erased plugin the glue calls.
var exported plugin

type plugin interface {
	info() Info
	reconcile(primary string, owned []string, cache Cache) (wireOutcome, *Failure)
}

type typed[P any] struct{ r Reconciler[P] }

func (t typed[P]) info() Info { return t.r.Info() }

func (t typed[P]) reconcile(primary string, owned []string, cache Cache) (wireOutcome, *Failure) {
	return run(t.r, primary, owned, cache)
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

// run is one reconcile, the same natively and in the component.
func run[P any](r Reconciler[P], primary string, owned []string, cache Cache) (wireOutcome, *Failure) {
	var p P
	if err := decode(primary, &p); err != nil {
		return wireOutcome{}, Permanent(fmt.Sprintf("the primary object does not parse: %v", err))
	}
	ctx := &Context{Cache: cache, owned: owned, primary: primary}
	out, err := r.Reconcile(&p, ctx)
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
