// Admission: what the API server should refuse to store, so `kubectl apply` says it at once
// instead of an InvalidSpec or ErrResourceExists event after the fact (as the Rust guest-foo's
// admit). Schema checks (replicas 1-10) stay in the CRD.

package main

import (
	"fmt"

	"kwop.dev/guest"
)

// Validate refuses a missing or invalid deploymentName, or one naming an existing Deployment
// this Foo does not control, on CREATE and whenever an UPDATE changes spec; an UPDATE that leaves
// spec as it was (labels, annotations, finalizers) is never refused for it — a warning says what
// is wrong instead — so a Foo that went wrong can still be labelled, fixed or deleted.
func (GuestFoo) Validate(req *guest.AdmissionRequest[Foo], ctx *guest.Context) ([]string, error) {
	const field = "spec.deploymentName"
	foo := req.Object
	problem, err := deploymentNameProblem(foo, guest.NewLister[Deployment](ctx, deploymentGVK))
	if err != nil || problem == "" {
		return nil, err
	}
	if req.Old != nil && sameSpec(req.Old.Spec, foo.Spec) {
		return []string{field + ": " + problem}, nil
	}
	return nil, guest.FieldViolation(field, problem)
}

// deploymentNameProblem is what is wrong with foo's deploymentName ("" when nothing is).
func deploymentNameProblem(foo *Foo, deployments guest.Lister[Deployment]) (string, error) {
	name := foo.Spec.DeploymentName
	if name == "" {
		return "is required: the name of the Deployment this Foo manages", nil
	}
	if why := checkDNSSubdomain(name); why != "" {
		return fmt.Sprintf("%s is not a valid Deployment name: %s", debugQuote(name), why), nil
	}
	d, err := deployments.Get(foo.Namespace, name)
	if guest.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err // the cache holds something unreadable: not the user's fault, not a refusal
	}
	if !guest.IsControlledBy(d, foo) {
		return fmt.Sprintf("Deployment %s already exists in namespace %s and is not managed by this Foo; choose another name",
			debugQuote(name), debugQuote(foo.Namespace)), nil
	}
	return "", nil
}

func sameSpec(a, b FooSpec) bool {
	if a.DeploymentName != b.DeploymentName || (a.Replicas == nil) != (b.Replicas == nil) {
		return false
	}
	return a.Replicas == nil || *a.Replicas == *b.Replicas
}
