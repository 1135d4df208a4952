// go-faults: a Go test plugin (tests/tests/lang_go.rs) whose Fin objects (tests/crds/fin.yaml)
// pick how each export misbehaves, so the host's handling of Go panics and errors can be seen on
// a real cluster:
//
//	spec.reconcile: panic  -> Reconcile panics (a nil map, in broken.go)
//	spec.finalize:  error  -> Finalize returns an error; panic -> Finalize panics
//	spec.validate:  deny   -> Validate refuses; error -> returns an error; panic -> panics
//
// Otherwise Reconcile applies a ConfigMap <name>-ok and Finalize deletes it and is done.
package main

import (
	"errors"
	"fmt"

	"kwop.dev/guest"
)

var configMapGVK = guest.GVK{Version: "v1", Kind: "ConfigMap"}

// Fin is the test kind.
type Fin struct {
	guest.TypeMeta   `json:",inline"`
	guest.ObjectMeta `json:"metadata"`
	Spec             struct {
		Reconcile string `json:"reconcile"`
		Finalize  string `json:"finalize"`
		Validate  string `json:"validate"`
	} `json:"spec"`
}

type configMap struct {
	guest.TypeMeta   `json:",inline"`
	guest.ObjectMeta `json:"metadata"`
	Data             map[string]string `json:"data"`
}

// Faults is the plugin.
type Faults struct{}

// Info: Fins, their ConfigMaps; finalizes and validates.
func (Faults) Info() guest.Info {
	return guest.Info{Name: "go-faults", Version: "0.2.0", Primary: guest.GVK{Group: "test.kwop.dev", Version: "v1", Kind: "Fin"},
		Owns: []guest.GVK{configMapGVK}, Finalizes: true, Validates: true}
}

// Reconcile applies <name>-ok, or panics.
func (Faults) Reconcile(fin *Fin, ctx *guest.Context) (*guest.Outcome, error) {
	if fin.Spec.Reconcile == "panic" {
		countReasons(fin.Name)
	}
	cm := configMap{ObjectMeta: guest.ObjectMeta{Name: fin.Name + "-ok"}, Data: map[string]string{"fin": fin.Name}}
	return guest.NewOutcome().ApplyAs(configMapGVK, cm), nil
}

// Finalize deletes <name>-ok, or fails.
func (Faults) Finalize(fin *Fin, ctx *guest.Context) (*guest.FinalizeOutcome, error) {
	switch fin.Spec.Finalize {
	case "error":
		return nil, fmt.Errorf("the bucket of %s is still in use", fin.Name)
	case "panic":
		countReasons(fin.Name)
	}
	return guest.Done().Delete(configMapGVK, "", fin.Name+"-ok"), nil
}

// Validate allows, refuses, or fails.
func (Faults) Validate(req *guest.AdmissionRequest[Fin], ctx *guest.Context) ([]string, error) {
	switch req.Object.Spec.Validate {
	case "deny":
		return nil, guest.FieldViolation("spec.validate", "go-faults says no")
	case "error":
		return nil, errors.New("the quota service is down")
	case "panic":
		var fins []string
		return nil, errors.New(fins[len(req.Object.Name)])
	}
	return nil, nil
}

func init() { guest.Export[Fin](Faults{}) }

func main() {}
