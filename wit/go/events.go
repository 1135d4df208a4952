package guest

import (
	"errors"
	"fmt"
)

// EventType is Normal or Warning, as corev1.EventTypeNormal and corev1.EventTypeWarning.
type EventType string

const (
	// EventTypeNormal is informational: something happened as expected.
	EventTypeNormal EventType = "Normal"
	// EventTypeWarning says something is wrong and a human may need to look.
	EventTypeWarning EventType = "Warning"
)

// Event is an event the host records on the primary (events.k8s.io). Normal events are recorded
// only when the reconcile wrote something; Warning events always.
type Event struct {
	Type EventType
	// Reason is short PascalCase, at most 128 bytes (e.g. "Synced").
	Reason string
	// Message is for humans, at most 1024 bytes.
	Message string
}

// Normal is a Normal event.
func Normal(reason, message string) Event { return Event{EventTypeNormal, reason, message} }

// Warning is a Warning event.
func Warning(reason, message string) Event { return Event{EventTypeWarning, reason, message} }

// Recorder collects the events of one reconcile, like client-go's record.EventRecorder (the
// object is always the primary). They go out with the outcome or with the failure.
type Recorder struct {
	events []Event
}

// Event records an event of type eventtype (EventTypeNormal or EventTypeWarning).
func (r *Recorder) Event(eventtype EventType, reason, message string) {
	r.events = append(r.events, Event{eventtype, reason, message})
}

// Eventf is Event with a fmt.Sprintf message.
func (r *Recorder) Eventf(eventtype EventType, reason, messageFmt string, args ...any) {
	r.Event(eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func checkEvents(events []Event) error {
	for _, e := range events {
		if e.Type != EventTypeNormal && e.Type != EventTypeWarning {
			return fmt.Errorf("event %q has type %q: want %q or %q", e.Reason, e.Type, EventTypeNormal, EventTypeWarning)
		}
	}
	return nil
}

// Failure is a reconcile that could not decide: nothing is written except its events. Return it
// (or wrap it) as the error of Reconcile.
type Failure struct {
	// Message says what went wrong, for the host's log and its Warning event.
	Message string
	// Retry: true retries with per-object exponential backoff; false waits until the primary or
	// one of its objects changes (e.g. an invalid spec the user must fix).
	Retry bool
	// Events to record on the primary (e.g. a Warning saying why).
	Events []Event
}

func (f *Failure) Error() string { return f.Message }

// WithEvent adds an event to record.
func (f *Failure) WithEvent(e Event) *Failure {
	f.Events = append(f.Events, e)
	return f
}

// Retryable is a failure retried with backoff (what any other error returned by Reconcile is).
func Retryable(message string) *Failure { return &Failure{Message: message, Retry: true} }

// Permanent is a failure only a change of the primary (or of its objects) can fix: no retry.
func Permanent(message string) *Failure { return &Failure{Message: message} }

// asFailure is the Failure err is or wraps (copied), or a retryable one with err's message.
func asFailure(err error) *Failure {
	var f *Failure
	if errors.As(err, &f) && f != nil {
		c := *f
		c.Events = append([]Event(nil), f.Events...)
		if c.Message == "" || err.Error() != f.Error() {
			c.Message = err.Error()
		}
		return &c
	}
	return Retryable(err.Error())
}
