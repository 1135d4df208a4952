// The Foo → Deployment logic, ported from sample-controller's controller.go (syncHandler,
// newDeployment, updateFooStatus) onto the kwop Go SDK: the listers read the host's cache, the
// recorder's events go out with the outcome, and the Deployment is a server-side apply intent
// (the host writes it only when the observed one differs, and sets the owner reference).

package main

import (
	"fmt"

	"kwop.dev/guest"
)

const (
	// SuccessSynced is the reason of the event recorded when a Foo is synced.
	SuccessSynced = "Synced"
	// ErrResourceExists is the reason of the event recorded when the Deployment exists but is
	// not controlled by the Foo.
	ErrResourceExists = "ErrResourceExists"
	// InvalidSpec is the reason of the event recorded when a Foo's spec cannot be acted on.
	// sample-controller only logs these; we also tell the user, on the object, why nothing happens.
	InvalidSpec = "InvalidSpec"

	// MessageResourceExists is the message of the ErrResourceExists event.
	MessageResourceExists = "Resource %q already exists and is not managed by Foo"
	// MessageResourceSynced is the message of the SuccessSynced event.
	MessageResourceSynced = "Foo synced successfully"
)

var deploymentGVK = guest.GVK{Group: "apps", Version: "v1", Kind: "Deployment"}

// Controller is sample-controller's Controller for one reconcile.
type Controller struct {
	deploymentsLister guest.Lister[Deployment]
	recorder          *guest.Recorder
}

// NewController reads Deployments through the host's cache and records events on the Foo.
func NewController(ctx *guest.Context) *Controller {
	return &Controller{
		deploymentsLister: guest.NewLister[Deployment](ctx, deploymentGVK),
		recorder:          &ctx.Recorder,
	}
}

// syncHandler compares the actual state with the desired, and says what to change to converge
// the two. It then says what the status of the Foo should be.
func (c *Controller) syncHandler(foo *Foo) (*guest.Outcome, error) {
	deploymentName := foo.Spec.DeploymentName
	if deploymentName == "" {
		// sample-controller logs "Deployment name missing from object reference" and drops the
		// item: the user has to fix the Foo, which queues it again. Say so on the Foo, no retry.
		return nil, c.invalid("spec.deploymentName is missing or empty: no Deployment to manage")
	}
	if why := checkDNSSubdomain(deploymentName); why != "" {
		// sample-controller would retry a create the API server rejects, forever.
		return nil, c.invalid(fmt.Sprintf("spec.deploymentName %s is not a valid Deployment name: %s", debugQuote(deploymentName), why))
	}

	// Get the deployment with the name specified in Foo.spec
	deployment, err := c.deploymentsLister.Get(foo.Namespace, deploymentName)
	// If the resource doesn't exist, we'll create it: the intent below.
	if guest.IsNotFound(err) {
		deployment, err = nil, nil
	}
	// A cached Deployment that does not decode: retry, as for any error of the lister.
	if err != nil {
		return nil, err
	}

	// If the Deployment is not controlled by this Foo resource, we should log
	// a warning to the event recorder and return error msg.
	if deployment != nil && !guest.IsControlledBy(deployment, foo) {
		msg := fmt.Sprintf(MessageResourceExists, deploymentName)
		c.recorder.Event(guest.EventTypeWarning, ErrResourceExists, msg)
		return nil, fmt.Errorf("%s", msg)
	}

	// Create or update: one server-side apply intent; the host writes nothing when the observed
	// Deployment already matches (sample-controller compares the replicas only).
	out := guest.NewOutcome().Apply(newDeployment(foo))

	// Finally, we update the status block of the Foo resource to reflect the
	// current state of the world
	c.updateFooStatus(out, foo, deployment)

	c.recorder.Event(guest.EventTypeNormal, SuccessSynced, MessageResourceSynced)
	return out, nil
}

func (c *Controller) invalid(msg string) error {
	c.recorder.Event(guest.EventTypeWarning, InvalidSpec, msg)
	return guest.Permanent(msg)
}

// updateFooStatus sets the Foo's status from the Deployment (none yet: 0 available).
func (c *Controller) updateFooStatus(out *guest.Outcome, foo *Foo, deployment *Deployment) {
	// NEVER modify objects from the store: the new status is a new value.
	status := foo.Status
	status.AvailableReplicas = 0
	if deployment != nil && deployment.Status != nil {
		status.AvailableReplicas = deployment.Status.AvailableReplicas
	}
	out.Status(status)
}

// newDeployment creates a new Deployment for a Foo resource. The owner reference is not here:
// the kwop host sets the controller reference itself.
func newDeployment(foo *Foo) *Deployment {
	labels := map[string]string{
		"app":        "nginx",
		"controller": foo.Name,
	}
	return &Deployment{
		TypeMeta: guest.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: guest.ObjectMeta{
			Name:      foo.Spec.DeploymentName,
			Namespace: foo.Namespace,
		},
		Spec: DeploymentSpec{
			// Unset replicas stay unset (the API server defaults them to 1).
			Replicas: foo.Spec.Replicas,
			Selector: &LabelSelector{
				MatchLabels: labels,
			},
			Template: PodTemplateSpec{
				ObjectMeta: guest.ObjectMeta{
					Labels: labels,
				},
				Spec: PodSpec{
					Containers: []Container{
						{
							Name:  "nginx",
							Image: "nginx:latest",
						},
					},
				},
			},
		},
	}
}

// checkDNSSubdomain says why s is not an RFC 1123 subdomain, as the API server checks a
// Deployment name ("" when it is one).
func checkDNSSubdomain(s string) string {
	if len(s) > 253 {
		return "must be no more than 253 characters"
	}
	label := 0 // length of the current label
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if label == 0 || s[i-1] == '-' {
				return dnsSubdomainRule
			}
			label = 0
			continue
		}
		b := s[i]
		if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-') || (label == 0 && b == '-') {
			return dnsSubdomainRule
		}
		label++
	}
	return ""
}

const dnsSubdomainRule = "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
