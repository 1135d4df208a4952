// guest-foo in Go: kubernetes/sample-controller's syncHandler as a kwop plugin, built with
// standard Go (GOOS=wasip1) into a WebAssembly component by build.sh.

package main

import "kwop.dev/guest"

// GuestFoo is the plugin: what it reconciles, and one reconcile.
type GuestFoo struct{}

// Info says guest-foo-go reconciles Foos and owns Deployments.
func (GuestFoo) Info() guest.Info {
	return guest.Info{
		Name:    "guest-foo-go",
		Version: "0.1.0",
		Primary: guest.GVK{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"},
		Owns:    []guest.GVK{deploymentGVK},
	}
}

// Reconcile is one sync of a Foo.
func (GuestFoo) Reconcile(foo *Foo, ctx *guest.Context) (*guest.Outcome, error) {
	return NewController(ctx).syncHandler(foo)
}

func init() { guest.Export[Foo](GuestFoo{}) }

// main never runs: the host calls the exports of the component.
func main() {}
