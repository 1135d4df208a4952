package guest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// lifecycle is a reconciler with Finalize and Validate, each behaving as the test says.
type lifecycle struct {
	widgets
	finalize func(w *widget, ctx *Context) (*FinalizeOutcome, error)
	validate func(req *AdmissionRequest[widget], ctx *Context) ([]string, error)
}

func (lifecycle) Info() Info {
	return Info{Name: "lifecycle", Version: "1", Primary: GVK{"example.com", "v1", "Widget"}, Owns: []GVK{cmGVK},
		OwnsAcrossNamespaces: []GVK{{"", "v1", "Secret"}}, Finalizes: true, Validates: true}
}

func (l lifecycle) Finalize(w *widget, ctx *Context) (*FinalizeOutcome, error) { return l.finalize(w, ctx) }

func (l lifecycle) Validate(req *AdmissionRequest[widget], ctx *Context) ([]string, error) {
	return l.validate(req, ctx)
}

const deleting = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u1","generation":3,"deletionTimestamp":"2026-01-02T03:04:05Z"},"spec":{"size":2}}`

const farSecret = `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"copy","namespace":"elsewhere","labels":{"kwop.dev/owner-uid":"u1"}}}`

func TestFinalizeSeesOwnedObjectsAcrossNamespacesAndDeletesThem(t *testing.T) {
	l := lifecycle{finalize: func(w *widget, ctx *Context) (*FinalizeOutcome, error) {
		if w.DeletionTimestamp == nil {
			t.Error("no deletionTimestamp")
		}
		secrets, err := Owned[configMap](ctx, GVK{"", "v1", "Secret"})
		if err != nil || len(secrets) != 1 || secrets[0].Namespace != "elsewhere" {
			t.Errorf("owned secrets %+v, %v", secrets, err)
		}
		return Done().Delete(GVK{"", "v1", "Secret"}, "elsewhere", "copy").Event(Normal("CleanedUp", "1 copy")), nil
	}}
	res := RunFinalize[widget](l, deleting, NewFakeCache(farSecret, mine("a"),
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x","namespace":"elsewhere","labels":{"kwop.dev/owner-uid":"other"}}}`))
	if res.Failure != nil || !res.Done || len(res.Delete) != 1 || res.Delete[0].Namespace != "elsewhere" || len(res.Events) != 1 {
		t.Fatalf("%+v", res)
	}
}

func TestFinalizeNotDoneAsksAgain(t *testing.T) {
	l := lifecycle{finalize: func(*widget, *Context) (*FinalizeOutcome, error) {
		return NotDone().RequeueAfter(2 * time.Second), nil
	}}
	res := RunFinalize[widget](l, deleting, nil)
	if res.Failure != nil || res.Done || res.RequeueAfter == nil || *res.RequeueAfter != 2*time.Second {
		t.Fatalf("%+v", res)
	}
}

func TestAReconcilerWithoutFinalizeIsDoneAtOnce(t *testing.T) {
	res := RunFinalize[widget](widgets{}, deleting, nil)
	if res.Failure != nil || !res.Done {
		t.Fatalf("%+v", res)
	}
}

func TestAFinalizeErrorIsAFailureWithItsMessage(t *testing.T) {
	l := lifecycle{finalize: func(_ *widget, ctx *Context) (*FinalizeOutcome, error) {
		ctx.Recorder.Event(EventTypeNormal, "Trying", "once")
		return nil, errors.New("the bucket is still in use")
	}}
	res := RunFinalize[widget](l, deleting, nil)
	if res.Failure == nil || res.Failure.Message != "the bucket is still in use" || !res.Failure.Retry || res.Done || len(res.Events) != 1 {
		t.Fatalf("%+v", res)
	}
}

// nilMap panics the way plugins do by mistake.
func nilMap() {
	var m map[string]int
	m["boom"] = 1
}

func TestPanicsInReconcileAndFinalizeAreFailuresWithGoMessageAndStack(t *testing.T) {
	l := lifecycle{finalize: func(*widget, *Context) (*FinalizeOutcome, error) { nilMap(); return Done(), nil }}
	l.reconcile = func(*widget, *Context) (*Outcome, error) { nilMap(); return nil, nil }
	for name, f := range map[string]*Failure{"reconcile": Run[widget](l, primary, nil).Failure,
		"finalize": RunFinalize[widget](l, deleting, nil).Failure} {
		if f == nil || !f.Retry {
			t.Fatalf("%s: %+v", name, f)
		}
		for _, want := range []string{"panic: assignment to entry in nil map", "goroutine 1 [running]:",
			"kwop.dev/guest.nilMap(...)", "calls_test.go:"} {
			if !strings.Contains(f.Message, want) {
				t.Errorf("%s: %q not in %s", name, want, f.Message)
			}
		}
		if strings.Contains(f.Message, "runtime.") || strings.Contains(f.Message, "guest.catch") {
			t.Errorf("%s: the runtime's and the SDK's frames are shown: %s", name, f.Message)
		}
	}
}

func TestValidateAllowsWarnsAndRefuses(t *testing.T) {
	l := lifecycle{validate: func(req *AdmissionRequest[widget], _ *Context) ([]string, error) {
		if req.Object.Spec.Size > 10 {
			return nil, FieldViolation("spec.size", "at most 10")
		}
		if req.Operation == Update && req.Old.Spec.Size > req.Object.Spec.Size {
			return []string{"shrinking"}, nil
		}
		return nil, nil
	}}
	big := strings.Replace(primary, `"size":2`, `"size":11`, 1)
	if r := RunValidate[widget](l, Create, big, nil, nil); r.Allowed() || len(r.Violations) != 1 ||
		r.Violations[0].Field != "spec.size" || r.Violations[0].Message != "at most 10" {
		t.Errorf("big: %+v", r)
	}
	if r := RunValidate[widget](l, Update, primary, strings.Replace(primary, `"size":2`, `"size":5`, 1), nil); !r.Allowed() ||
		len(r.Warnings) != 1 {
		t.Errorf("shrink: %+v", r)
	}
	if r := RunValidate[widget](l, Create, primary, nil, nil); !r.Allowed() || r.Warnings == nil {
		t.Errorf("fine: %+v", r)
	}
	if r := RunValidate[widget](widgets{}, Create, big, nil, nil); !r.Allowed() {
		t.Errorf("no Validate: %+v", r)
	}
}

func TestAValidateErrorOrPanicFailsTheCallInsteadOfRefusing(t *testing.T) {
	l := lifecycle{validate: func(*AdmissionRequest[widget], *Context) ([]string, error) {
		return nil, errors.New("the quota service is down")
	}}
	r := RunValidate[widget](l, Create, primary, nil, nil)
	if r.Err == nil || len(r.Violations) != 0 || !strings.Contains(r.Err.Message, "Validate failed: the quota service is down") {
		t.Errorf("error: %+v", r)
	}
	l.validate = func(*AdmissionRequest[widget], *Context) ([]string, error) { nilMap(); return nil, nil }
	r = RunValidate[widget](l, Create, primary, nil, nil)
	if r.Err == nil || !strings.HasPrefix(r.Err.Message, "panic: assignment to entry in nil map") ||
		!strings.Contains(r.Err.Message, "calls_test.go:") {
		t.Errorf("panic: %+v", r)
	}
	// a wrapped Violations still refuses
	l.validate = func(*AdmissionRequest[widget], *Context) ([]string, error) {
		return nil, errors.Join(errors.New("context"), Refuse("no"))
	}
	if r = RunValidate[widget](l, Create, primary, nil, nil); r.Err != nil || len(r.Violations) != 1 {
		t.Errorf("wrapped: %+v", r)
	}
}

func TestContextCarriesTheInstantAndTheGeneration(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	l := lifecycle{}
	l.reconcile = func(_ *widget, ctx *Context) (*Outcome, error) {
		var conds []Condition
		SetStatusCondition(&conds, ctx.Condition("Ready", ConditionTrue, "Synced", "ok"))
		if !ctx.Now.Equal(at) || conds[0].ObservedGeneration != 3 || !conds[0].LastTransitionTime.Equal(at) {
			t.Errorf("now %v, conditions %+v", ctx.Now, conds)
		}
		return NewOutcome().Status(map[string]any{"observedGeneration": ctx.Generation, "conditions": conds}), nil
	}
	cache := NewFakeCache()
	cache.Now = at
	res := Run[widget](l, primary, cache)
	if res.Failure != nil || !strings.Contains(string(res.Status), `"lastTransitionTime":"2026-05-06T07:08:09Z"`) {
		t.Fatalf("%+v %s", res, res.Status)
	}
}
