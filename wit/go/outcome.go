package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Outcome is what should change, built by chaining:
//
//	guest.NewOutcome().ApplyAs(deploymentGVK, d).Status(status).Event(guest.Normal("Synced", "done"))
//
// An object that cannot be serialised is remembered and makes the reconcile a permanent failure
// when it returns, so the chain needs no error checks.
type Outcome struct {
	apply   []string
	deletes []ObjectRef
	status  *string
	events  []Event
	requeue *uint64
	errs    []error
}

// ObjectRef names an object to delete. An empty Namespace means the primary's (or none, for a
// cluster-scoped kind).
type ObjectRef struct {
	GVK       GVK
	Namespace string
	Name      string
}

// NewOutcome is an outcome that changes nothing.
func NewOutcome() *Outcome { return &Outcome{} }

// Apply adds a server-side apply intent: the fields you want set, with apiVersion, kind and
// metadata.name (metadata.namespace defaults to the primary's). Only kinds in Info.Owns; do not
// set ownerReferences (the host sets the controller reference to the primary). The host writes
// nothing when the observed object already satisfies the intent.
//
// Go's zero values are serialised unless the field is omitempty: a k8s.io/api struct written
// here also applies its empty fields ("status": {}, "resources": {}, "creationTimestamp": null).
// Use an apply configuration (k8s.io/client-go/applyconfigurations) or a struct with omitempty
// fields to say only what you mean.
func (o *Outcome) Apply(object any) *Outcome {
	text, err := json.Marshal(object)
	if err != nil {
		o.errs = append(o.errs, fmt.Errorf("cannot serialise an intent: %w", err))
		return o
	}
	var tm TypeMeta
	if err := json.Unmarshal(text, &tm); err != nil {
		o.errs = append(o.errs, fmt.Errorf("an intent must be a JSON object, not %.40s", text))
		return o
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		o.errs = append(o.errs, fmt.Errorf("an intent has no apiVersion or kind (typed Go objects leave TypeMeta empty: use ApplyAs): %.200s", text))
		return o
	}
	o.apply = append(o.apply, string(text))
	return o
}

// ApplyAs is Apply for an object whose apiVersion and kind are not set (k8s.io/api structs
// usually leave TypeMeta empty): they are set from gvk. An object that sets other ones is an
// error.
func (o *Outcome) ApplyAs(gvk GVK, object any) *Outcome {
	text, err := json.Marshal(object)
	if err != nil {
		o.errs = append(o.errs, fmt.Errorf("cannot serialise a %s intent: %w", gvk.Kind, err))
		return o
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(text, &m) != nil || m == nil {
		o.errs = append(o.errs, fmt.Errorf("a %s intent must be a JSON object, not %.40s", gvk.Kind, text))
		return o
	}
	for _, f := range [2][2]string{{"apiVersion", gvk.APIVersion()}, {"kind", gvk.Kind}} {
		field, want := f[0], f[1]
		var got string
		if raw, ok := m[field]; ok && (json.Unmarshal(raw, &got) != nil || (got != "" && got != want)) {
			o.errs = append(o.errs, fmt.Errorf("a %s intent says %s %s", gvk, field, raw))
			return o
		}
		m[field], _ = json.Marshal(want)
	}
	text, err = json.Marshal(m)
	if err != nil {
		o.errs = append(o.errs, fmt.Errorf("cannot serialise a %s intent: %w", gvk.Kind, err))
		return o
	}
	o.apply = append(o.apply, string(text))
	return o
}

// Delete adds an object to delete: only objects this primary controls; one already gone is fine.
func (o *Outcome) Delete(gvk GVK, namespace, name string) *Outcome {
	o.deletes = append(o.deletes, ObjectRef{GVK: gvk, Namespace: namespace, Name: name})
	return o
}

// Status sets the primary's new status: the value of its `status` field (a struct or map that
// serialises to a JSON object), written to the status subresource when it differs.
func (o *Outcome) Status(status any) *Outcome {
	text, err := json.Marshal(status)
	if err != nil {
		o.errs = append(o.errs, fmt.Errorf("cannot serialise the status: %w", err))
		return o
	}
	if len(text) == 0 || text[0] != '{' {
		o.errs = append(o.errs, fmt.Errorf("the status must serialise to a JSON object, not %.40s", text))
		return o
	}
	s := string(text)
	o.status = &s
	return o
}

// Event adds an event to record on the primary (see also Context.Recorder).
func (o *Outcome) Event(e Event) *Outcome {
	o.events = append(o.events, e)
	return o
}

// RequeueAfter asks to reconcile the primary again after d even if nothing changes (rounded up
// to whole milliseconds; d <= 0 means now).
func (o *Outcome) RequeueAfter(d time.Duration) *Outcome {
	ms := uint64(0)
	if d > 0 {
		ms = uint64((d + time.Millisecond - 1) / time.Millisecond)
	}
	o.requeue = &ms
	return o
}

// Err is what went wrong while building the outcome (nil if nothing did).
func (o *Outcome) Err() error { return errors.Join(o.errs...) }

// wireOutcome is an Outcome as it crosses to the host.
type wireOutcome struct {
	apply   []string
	deletes []ObjectRef
	status  *string
	events  []Event
	requeue *uint64
}

func (o *Outcome) wire() (wireOutcome, error) {
	if err := o.Err(); err != nil {
		return wireOutcome{}, err
	}
	return wireOutcome{apply: o.apply, deletes: o.deletes, status: o.status, events: o.events, requeue: o.requeue}, nil
}
