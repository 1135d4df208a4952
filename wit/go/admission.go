package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Operation is the kind of change an admission request is about.
type Operation string

const (
	// Create: the object is being created (it has no uid yet).
	Create Operation = "CREATE"
	// Update: the object is being changed (AdmissionRequest.Old is the stored version).
	Update Operation = "UPDATE"
)

// AdmissionRequest is one admission request for a primary, as Validate sees it.
type AdmissionRequest[P any] struct {
	Operation Operation
	// Object is the object as it would be stored (defaults applied; on CREATE without a uid).
	Object *P
	// Old is, on UPDATE, the object as it is stored now; nil on CREATE.
	Old *P
	// User is who asks (userInfo.username), for messages only.
	User string
	// DryRun: nothing will be stored either way (kubectl apply --dry-run=server).
	DryRun bool
	// Now is the request's instant.
	Now time.Time
	// ObjectJSON is Object as the API server sent it.
	ObjectJSON json.RawMessage
}

// Violation is why an object is refused: kubectl prints its message (the field goes with it).
type Violation struct {
	// Field is the field at fault, as a path (spec.deploymentName); "" for the object as a whole.
	Field string
	// Message says what is wrong and how to fix it.
	Message string
}

func (v Violation) String() string {
	if v.Field == "" {
		return v.Message
	}
	return v.Field + ": " + v.Message
}

// Violations is the error that refuses an object: return it from Validate (as a field.ErrorList
// becomes an Invalid error in controller-runtime's webhooks). It may be wrapped.
type Violations []Violation

func (vs Violations) Error() string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// FieldViolation refuses an object for one field.
func FieldViolation(field, message string) Violations {
	return Violations{{Field: field, Message: message}}
}

// Refuse refuses an object as a whole.
func Refuse(message string) Violations { return Violations{{Message: message}} }

// admissionInput is an admission request as the host sends it.
type admissionInput struct {
	op     Operation
	object string
	old    *string
	user   string
	dryRun bool
	now    time.Time
}

// ValidateError is how a Validate that did not decide (an error other than Violations, or a
// panic) fails the admission call: the message the host and the API server report.
type ValidateError struct{ Message string }

func (e *ValidateError) Error() string { return e.Message }

// runValidate is one validate, the same natively and in the component: warnings (allowed),
// violations (refused) or an error (the call fails; the failurePolicy decides). A reconciler
// that is not a Validator allows everything.
func runValidate[P any](r Reconciler[P], in admissionInput, cache Cache) ([]string, []Violation, *ValidateError) {
	val, ok := r.(Validator[P])
	if !ok {
		return nil, nil, nil
	}
	req := &AdmissionRequest[P]{Operation: in.op, User: in.user, DryRun: in.dryRun, Now: in.now.UTC(),
		ObjectJSON: json.RawMessage(in.object), Object: new(P)}
	if err := decode(in.object, req.Object); err != nil {
		// An object the plugin's type cannot read is refused, with the reason.
		return nil, []Violation{{Message: fmt.Sprintf("the object does not parse: %v", err)}}, nil
	}
	if in.old != nil {
		req.Old = new(P)
		if err := decode(*in.old, req.Old); err != nil {
			return nil, nil, &ValidateError{fmt.Sprintf("the stored object does not parse: %v", err)}
		}
	}
	ctx := newContext(in.object, nil, in.now, cache)
	var warnings []string
	var err error
	if pan := catch(func() { warnings, err = val.Validate(req, ctx) }); pan != nil {
		return nil, nil, &ValidateError{pan.String()}
	}
	if err == nil {
		return append([]string{}, warnings...), nil, nil
	}
	var vs Violations
	if errors.As(err, &vs) && len(vs) > 0 {
		return nil, append([]Violation(nil), vs...), nil
	}
	return nil, nil, &ValidateError{"kwop.dev/guest: Validate failed: " + err.Error() +
		"\n(an error that is not guest.Violations fails the admission call, and the webhook's failurePolicy decides; return guest.Violations to refuse)"}
}
