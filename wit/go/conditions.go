package guest

import (
	"encoding/json"
	"fmt"
	"time"
)

// ConditionStatus is "True", "False" or "Unknown".
type ConditionStatus string

const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is metav1.Condition, with the same JSON, for a primary's status.conditions.
type Condition struct {
	// Type is CamelCase, e.g. "Ready".
	Type   string          `json:"type"`
	Status ConditionStatus `json:"status"`
	// ObservedGeneration is the metadata.generation the condition was set from.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime Time `json:"lastTransitionTime"`
	// Reason is CamelCase, machine-readable.
	Reason string `json:"reason"`
	// Message is for humans.
	Message string `json:"message"`
}

// Time is metav1.Time: RFC 3339 in UTC with whole seconds in JSON, null when zero.
type Time struct {
	time.Time
}

// NewTime is t as a Time (truncated to whole seconds, as it would read back from the API server).
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Second)} }

// Now is the current time as a Time. In a reconcile the host's clock is the reconcile's: every
// reading during one call gives the same time.
func Now() Time { return NewTime(now()) }

// now is the clock (replaced in tests).
var now = time.Now

func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.UTC().Format(time.RFC3339))
}

func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	p, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("not an RFC 3339 time: %q", s)
	}
	t.Time = p.UTC()
	return nil
}

// SetStatusCondition sets c in conditions, as k8s.io/apimachinery's meta.SetStatusCondition:
// a new type is appended; for an existing one, Status, Reason, Message and ObservedGeneration
// are updated, and LastTransitionTime changes only when Status does (to c.LastTransitionTime,
// or Now() when that is zero). Reports whether anything changed: an unchanged condition keeps
// the status equal to what the host observed, so the host writes nothing.
func SetStatusCondition(conditions *[]Condition, c Condition) (changed bool) {
	if conditions == nil {
		return false
	}
	existing := FindStatusCondition(*conditions, c.Type)
	if existing == nil {
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = Now()
		}
		*conditions = append(*conditions, c)
		return true
	}
	if existing.Status != c.Status {
		existing.Status = c.Status
		if !c.LastTransitionTime.IsZero() {
			existing.LastTransitionTime = c.LastTransitionTime
		} else {
			existing.LastTransitionTime = Now()
		}
		changed = true
	}
	if existing.Reason != c.Reason {
		existing.Reason = c.Reason
		changed = true
	}
	if existing.Message != c.Message {
		existing.Message = c.Message
		changed = true
	}
	if existing.ObservedGeneration != c.ObservedGeneration {
		existing.ObservedGeneration = c.ObservedGeneration
		changed = true
	}
	return changed
}

// RemoveStatusCondition removes the condition of type t; reports whether there was one.
func RemoveStatusCondition(conditions *[]Condition, t string) (removed bool) {
	if conditions == nil || len(*conditions) == 0 {
		return false
	}
	kept := (*conditions)[:0]
	for _, c := range *conditions {
		if c.Type == t {
			removed = true
			continue
		}
		kept = append(kept, c)
	}
	*conditions = kept
	return removed
}

// FindStatusCondition returns the condition of type t, or nil.
func FindStatusCondition(conditions []Condition, t string) *Condition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}

// IsStatusConditionTrue reports whether the condition of type t is present and True.
func IsStatusConditionTrue(conditions []Condition, t string) bool {
	return IsStatusConditionPresentAndEqual(conditions, t, ConditionTrue)
}

// IsStatusConditionFalse reports whether the condition of type t is present and False.
func IsStatusConditionFalse(conditions []Condition, t string) bool {
	return IsStatusConditionPresentAndEqual(conditions, t, ConditionFalse)
}

// IsStatusConditionPresentAndEqual reports whether the condition of type t has status s.
func IsStatusConditionPresentAndEqual(conditions []Condition, t string, s ConditionStatus) bool {
	c := FindStatusCondition(conditions, t)
	return c != nil && c.Status == s
}
