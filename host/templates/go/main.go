// Command {{name}} is a kwop reconcile plugin (kwop:reconciler@0.2): for every Foo
// (samplecontroller.k8s.io/v1alpha1) it applies a ConfigMap <name>-info describing the Foo,
// deletes it when the Foo is deleted (Finalize), and refuses a Foo without deploymentName before
// the API server stores it (Validate). ./build.sh turns it into a WebAssembly component;
// ./test.sh runs main_test.go natively.
package main

import (
	"fmt"

	"kwop.dev/guest"
)

var configMaps = guest.GVK{Version: "v1", Kind: "ConfigMap"}

// Foo is the part of the Foo custom resource this plugin reads.
type Foo struct {
	guest.TypeMeta   `json:",inline"`
	guest.ObjectMeta `json:"metadata"`
	Spec             struct {
		DeploymentName string `json:"deploymentName"`
		Replicas       *int32 `json:"replicas"`
	} `json:"spec"`
}

// ConfigMap is the part of corev1.ConfigMap it writes (empty fields are not written).
type ConfigMap struct {
	guest.TypeMeta   `json:",inline"`
	guest.ObjectMeta `json:"metadata"`
	Data             map[string]string `json:"data,omitempty"`
}

// Plugin is the reconciler.
type Plugin struct{}

// Info says what the plugin reconciles and owns: the host watches these kinds and lets the
// plugin write only what it owns. Finalizes: the host puts the finalizer kwop.dev/{{name}} on
// each Foo and calls Finalize when one is deleted. Validates: a host serving admission asks
// Validate before the API server stores a Foo.
func (Plugin) Info() guest.Info {
	return guest.Info{
		Name:      "{{name}}",
		Version:   "0.1.0",
		Primary:   guest.GVK{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"},
		Owns:      []guest.GVK{configMaps},
		Finalizes: true,
		Validates: true,
	}
}

// Reconcile returns what the world should look like for one Foo.
func (Plugin) Reconcile(foo *Foo, ctx *guest.Context) (*guest.Outcome, error) {
	if foo.Spec.DeploymentName == "" {
		// A failure: nothing is written; permanent (no retry) waits until the Foo changes.
		ctx.Recorder.Event(guest.EventTypeWarning, "InvalidSpec", "spec.deploymentName is required")
		return nil, guest.Permanent("spec.deploymentName is required")
	}
	replicas := int32(1)
	if foo.Spec.Replicas != nil {
		replicas = *foo.Spec.Replicas
	}
	cm := ConfigMap{
		// namespace: the Foo's; the owner reference is set by the host
		ObjectMeta: guest.ObjectMeta{Name: foo.Name + "-info"},
		Data: map[string]string{
			"foo":            foo.Name,
			"deploymentName": foo.Spec.DeploymentName,
			"replicas":       fmt.Sprint(replicas), // ConfigMap data values are strings
		},
	}
	ctx.Recorder.Event(guest.EventTypeNormal, "Synced", "ConfigMap "+cm.Name+" is up to date")
	// A server-side apply intent: the host writes only when the observed object differs.
	return guest.NewOutcome().ApplyAs(configMaps, cm), nil
}

// Finalize cleans up for a Foo being deleted; the Foo goes once it returns Done. The ConfigMap
// carries an owner reference, so Kubernetes would delete it anyway: deleting it here shows how
// (objects in other namespaces, Info.OwnsAcrossNamespaces, have no one else to delete them).
// An error (or a panic) keeps the Foo waiting: the host records a Warning FinalizeFailed with its
// message and calls again with backoff.
func (Plugin) Finalize(foo *Foo, ctx *guest.Context) (*guest.FinalizeOutcome, error) {
	return guest.Done().
		Delete(configMaps, foo.Namespace, foo.Name+"-info").
		Event(guest.Normal("Finalized", "ConfigMap "+foo.Name+"-info deleted")), nil
}

// Validate is asked before the API server stores a Foo (CREATE, UPDATE). guest.Violations
// refuses it (kubectl prints "spec.deploymentName: is required ..."); warnings are printed by
// kubectl. Any other error, or a panic, is not a refusal: the call fails and the webhook's
// failurePolicy decides.
func (Plugin) Validate(req *guest.AdmissionRequest[Foo], ctx *guest.Context) ([]string, error) {
	if req.Object.Spec.DeploymentName == "" {
		return nil, guest.FieldViolation("spec.deploymentName", "is required: the name of the Deployment this Foo is about")
	}
	return nil, nil
}

func init() { guest.Export[Foo](Plugin{}) } // the host calls the exports; main never runs
func main() {}
