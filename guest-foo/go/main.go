// guest-foo in Go: kubernetes/sample-controller's syncHandler as a kwop plugin, built with
// standard Go (GOOS=wasip1) into a WebAssembly component by build.sh.

package main

import "kwop.dev/guest"

// GuestFoo is the plugin: what it reconciles, and one reconcile.
type GuestFoo struct{}

// Info says guest-foo-go reconciles Foos, owns Deployments and validates Foos (Validate, in
// admission.go). It does not finalize: its Deployments carry an owner reference, and Kubernetes'
// garbage collector deletes them with the Foo.
func (GuestFoo) Info() guest.Info {
	return guest.Info{
		Name:      "guest-foo-go",
		Version:   "0.2.0",
		Primary:   guest.GVK{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"},
		Owns:      []guest.GVK{deploymentGVK},
		Validates: true,
	}
}

// Reconcile is one sync of a Foo.
func (GuestFoo) Reconcile(foo *Foo, ctx *guest.Context) (*guest.Outcome, error) {
	return NewController(ctx).syncHandler(foo)
}

func init() { guest.Export[Foo](GuestFoo{}) }

// main never runs: the host calls the exports of the component.
func main() {}
