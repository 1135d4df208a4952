package guest

import "time"

// FinalizeResult is what the host gets from one finalize run by RunFinalize.
type FinalizeResult struct {
	// Done: the primary may go once Delete is made.
	Done bool
	// Delete holds the objects to delete.
	Delete []ObjectRef
	// Status is the new status, nil to leave it alone.
	Status []byte
	// Events holds the events to record (also those of a Failure).
	Events []Event
	// RequeueAfter is nil unless the finalize asked to be called again after a while.
	RequeueAfter *time.Duration
	// Failure is set when the finalize failed (a returned error or a panic): the deletion waits.
	Failure *Failure
	// Log holds the lines the finalize logged.
	Log []LogLine
}

// RunFinalize calls r's Finalize natively, as the host does for a primary being deleted (a
// reconciler that is not a Finalizer is done at once). Arguments as Run.
func RunFinalize[P any](r Reconciler[P], primary any, cache *FakeCache) FinalizeResult {
	text, cache, owned := prepare(r, "guest.RunFinalize", primary, cache)
	var res FinalizeResult
	defer capture(&res.Log)()
	w, done, f := runFinalize(r, text, owned, cache.now(), cache)
	if f != nil {
		res.Failure, res.Events = f, f.Events
		return res
	}
	var full Result
	full.fill(w)
	res.Done, res.Delete, res.Status, res.Events, res.RequeueAfter = done, full.Delete, full.Status, full.Events, full.RequeueAfter
	return res
}

// ValidateResult is what the API server gets from one validate run by RunValidate.
type ValidateResult struct {
	// Warnings, when allowed.
	Warnings []string
	// Violations, when refused.
	Violations []Violation
	// Err is set when Validate did not decide (an error that is not Violations, or a panic): the
	// admission call fails with this message and the webhook's failurePolicy decides.
	Err *ValidateError
	// Log holds the lines the validate logged.
	Log []LogLine
}

// Allowed reports whether the object is admitted (no violations, no error).
func (v ValidateResult) Allowed() bool { return v.Err == nil && len(v.Violations) == 0 }

// RunValidate calls r's Validate natively, as the API server does through the host's webhook:
// object (and old, on UPDATE; nil on CREATE) as JSON text or Go objects. A reconciler that is not
// a Validator allows everything. A nil cache is an empty one.
func RunValidate[P any](r Reconciler[P], op Operation, object, old any, cache *FakeCache) ValidateResult {
	text, cache, _ := prepare(r, "guest.RunValidate", object, cache)
	in := admissionInput{op: op, object: text, user: "test-user", now: cache.now()}
	if old != nil {
		o, err := jsonText(old)
		if err != nil {
			panic("guest.RunValidate: " + err.Error())
		}
		in.old = &o
	}
	var res ValidateResult
	defer capture(&res.Log)()
	warnings, violations, err := runValidate(r, in, cache)
	res.Warnings, res.Violations, res.Err = warnings, violations, err
	return res
}
