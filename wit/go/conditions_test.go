package guest

import (
	"encoding/json"
	"testing"
	"time"
)

func at(s string) Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return NewTime(t)
}

func withClock(t *testing.T, s string) {
	saved := now
	now = func() time.Time { return at(s).Time }
	t.Cleanup(func() { now = saved })
}

func TestSetStatusConditionKeepsTheTransitionTimeWhileTheStatusHolds(t *testing.T) {
	withClock(t, "2026-01-02T03:04:05Z")
	var conds []Condition
	if !SetStatusCondition(&conds, Condition{Type: "Ready", Status: ConditionFalse, Reason: "Creating", ObservedGeneration: 1}) {
		t.Fatal("a new condition is a change")
	}
	if conds[0].LastTransitionTime != at("2026-01-02T03:04:05Z") {
		t.Fatalf("new condition time %v", conds[0].LastTransitionTime)
	}

	withClock(t, "2026-01-02T03:10:00Z")
	// Same status, new generation and message: updated, transition time kept.
	if !SetStatusCondition(&conds, Condition{Type: "Ready", Status: ConditionFalse, Reason: "Creating", Message: "1/3", ObservedGeneration: 2}) {
		t.Fatal("message and generation changed")
	}
	if c := conds[0]; c.LastTransitionTime != at("2026-01-02T03:04:05Z") || c.ObservedGeneration != 2 || c.Message != "1/3" {
		t.Fatalf("got %+v", c)
	}
	// Nothing different: no change, so the status the host observed stays equal (no write).
	if SetStatusCondition(&conds, Condition{Type: "Ready", Status: ConditionFalse, Reason: "Creating", Message: "1/3", ObservedGeneration: 2}) {
		t.Fatal("identical condition reported as a change")
	}
	// Status flips: transition time is the clock's.
	if !SetStatusCondition(&conds, Condition{Type: "Ready", Status: ConditionTrue, Reason: "Available", ObservedGeneration: 2}) {
		t.Fatal("status changed")
	}
	if c := conds[0]; c.LastTransitionTime != at("2026-01-02T03:10:00Z") || c.Reason != "Available" || c.Message != "" {
		t.Fatalf("got %+v", c)
	}
	// An explicit transition time wins.
	SetStatusCondition(&conds, Condition{Type: "Ready", Status: ConditionFalse, LastTransitionTime: at("2020-01-01T00:00:00Z")})
	if conds[0].LastTransitionTime != at("2020-01-01T00:00:00Z") {
		t.Fatalf("got %v", conds[0].LastTransitionTime)
	}
	SetStatusCondition(&conds, Condition{Type: "Progressing", Status: ConditionTrue})
	if len(conds) != 2 || !IsStatusConditionTrue(conds, "Progressing") || !IsStatusConditionFalse(conds, "Ready") ||
		IsStatusConditionTrue(conds, "Missing") || !IsStatusConditionPresentAndEqual(conds, "Ready", ConditionFalse) {
		t.Fatalf("got %+v", conds)
	}
	if !RemoveStatusCondition(&conds, "Ready") || RemoveStatusCondition(&conds, "Ready") || len(conds) != 1 ||
		FindStatusCondition(conds, "Progressing") == nil || FindStatusCondition(conds, "Ready") != nil {
		t.Fatalf("after remove: %+v", conds)
	}
	if SetStatusCondition(nil, Condition{Type: "X"}) || RemoveStatusCondition(nil, "X") {
		t.Fatal("nil conditions")
	}
}

func TestConditionsReadAndWriteAsMetav1(t *testing.T) {
	const text = `{"type":"Ready","status":"True","observedGeneration":4,"lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Available","message":"ok"}`
	var c Condition
	if err := json.Unmarshal([]byte(text), &c); err != nil {
		t.Fatal(err)
	}
	if c.LastTransitionTime != at("2026-01-02T03:04:05Z") || c.ObservedGeneration != 4 {
		t.Fatalf("got %+v", c)
	}
	back, _ := json.Marshal(c)
	if string(back) != text {
		t.Fatalf("round trip: %s", back)
	}
	// A status read from the cache, set again with the same values, serialises the same: the
	// host sees no difference and writes nothing.
	var status struct {
		Conditions []Condition `json:"conditions"`
	}
	_ = json.Unmarshal([]byte(`{"conditions":[`+text+`]}`), &status)
	withClock(t, "2030-01-01T00:00:00Z")
	SetStatusCondition(&status.Conditions, Condition{Type: "Ready", Status: ConditionTrue, ObservedGeneration: 4, Reason: "Available", Message: "ok"})
	again, _ := json.Marshal(status)
	if string(again) != `{"conditions":[`+text+`]}` {
		t.Fatalf("got %s", again)
	}
	zero, _ := json.Marshal(Condition{Type: "A", Status: ConditionUnknown})
	if string(zero) != `{"type":"A","status":"Unknown","lastTransitionTime":null,"reason":"","message":""}` {
		t.Fatalf("zero: %s", zero)
	}
	for _, bad := range []string{`"yesterday"`, `12`} {
		var tm Time
		if json.Unmarshal([]byte(bad), &tm) == nil {
			t.Errorf("%s parsed", bad)
		}
	}
	// Sub-second times are written in whole seconds, in UTC, as the API server keeps them.
	local := time.Date(2026, 1, 2, 4, 4, 5, 999, time.FixedZone("CET", 3600))
	if b, _ := json.Marshal(NewTime(local)); string(b) != `"2026-01-02T03:04:05Z"` {
		t.Fatalf("got %s", b)
	}
}
