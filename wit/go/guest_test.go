package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var cmGVK = GVK{Version: "v1", Kind: "ConfigMap"}

type widget struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       struct {
		Size int `json:"size"`
	} `json:"spec"`
}

type configMap struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
}

// widgets: a reconciler that exercises every part of the SDK the way a plugin does.
type widgets struct {
	reconcile func(w *widget, ctx *Context) (*Outcome, error)
}

func (widgets) Info() Info {
	return Info{Name: "widgets", Version: "1", Primary: GVK{"example.com", "v1", "Widget"}, Owns: []GVK{cmGVK}}
}

func (r widgets) Reconcile(w *widget, ctx *Context) (*Outcome, error) { return r.reconcile(w, ctx) }

const primary = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u1","generation":3},"spec":{"size":2}}`

func mine(name string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"w","uid":"u1","controller":true}]}}`, name)
}

func TestRunDecodesThePrimaryAndReturnsTheOutcome(t *testing.T) {
	r := widgets{func(w *widget, ctx *Context) (*Outcome, error) {
		if w.Name != "w" || w.Namespace != "ns" || w.UID != "u1" || w.Generation != 3 || w.Spec.Size != 2 {
			t.Errorf("primary decoded as %+v", w)
		}
		ctx.Recorder.Eventf(EventTypeNormal, "Sized", "size %d", w.Spec.Size)
		return NewOutcome().
			ApplyAs(cmGVK, configMap{ObjectMeta: ObjectMeta{Name: "w-size"}, Data: map[string]string{"size": "2"}}).
			Delete(cmGVK, "", "old").
			Status(map[string]int{"size": w.Spec.Size}).
			RequeueAfter(1500 * time.Microsecond), nil
	}}
	res := Run[widget](r, primary, nil)
	if res.Failure != nil {
		t.Fatalf("failed: %+v", res.Failure)
	}
	if len(res.Apply) != 1 || string(res.Apply[0]) != `{"apiVersion":"v1","data":{"size":"2"},"kind":"ConfigMap","metadata":{"name":"w-size"}}` {
		t.Errorf("apply = %s", res.Apply)
	}
	if len(res.Delete) != 1 || res.Delete[0] != (ObjectRef{cmGVK, "", "old"}) {
		t.Errorf("delete = %+v", res.Delete)
	}
	if string(res.Status) != `{"size":2}` {
		t.Errorf("status = %s", res.Status)
	}
	if len(res.Events) != 1 || res.Events[0] != Normal("Sized", "size 2") {
		t.Errorf("events = %+v", res.Events)
	}
	if res.RequeueAfter == nil || *res.RequeueAfter != 2*time.Millisecond {
		t.Errorf("requeue = %v (rounded up to whole ms)", res.RequeueAfter)
	}
}

func TestAPrimaryThatDoesNotDecodeIsAPermanentFailure(t *testing.T) {
	r := widgets{func(*widget, *Context) (*Outcome, error) { t.Fatal("called"); return nil, nil }}
	res := Run[widget](r, `{"spec":{"size":"big"}}`, nil)
	if res.Failure == nil || res.Failure.Retry || !strings.HasPrefix(res.Failure.Message, "the primary object does not parse: ") {
		t.Fatalf("got %+v", res.Failure)
	}
}

func TestErrorsBecomeFailuresWithTheRecordedEvents(t *testing.T) {
	for _, c := range []struct {
		err   error
		retry bool
		msg   string
	}{
		{errors.New("boom"), true, "boom"},
		{Permanent("fix the spec").WithEvent(Warning("Invalid", "fix the spec")), false, "fix the spec"},
		{fmt.Errorf("wrapped: %w", Permanent("inner")), false, "wrapped: inner"},
		{Retryable("later"), true, "later"},
	} {
		r := widgets{func(w *widget, ctx *Context) (*Outcome, error) {
			ctx.Recorder.Event(EventTypeWarning, "Recorded", "first")
			return NewOutcome().Apply(mine("ignored")), c.err
		}}
		res := Run[widget](r, primary, nil)
		f := res.Failure
		if f == nil || f.Retry != c.retry || f.Message != c.msg {
			t.Errorf("%v: got %+v", c.err, f)
			continue
		}
		if res.Apply != nil || res.Events[0] != Warning("Recorded", "first") {
			t.Errorf("%v: apply %s, events %+v", c.err, res.Apply, res.Events)
		}
		var in *Failure
		if errors.As(c.err, &in) && len(in.Events) > 0 && (len(res.Events) != 2 || res.Events[1] != in.Events[0]) {
			t.Errorf("%v: events %+v", c.err, res.Events)
		}
	}
}

func TestABadOutcomeIsAPermanentFailure(t *testing.T) {
	for name, build := range map[string]func(*Outcome){
		"unserialisable": func(o *Outcome) { o.Apply(map[string]any{"f": func() {}}) },
		"no type":        func(o *Outcome) { o.Apply(configMap{ObjectMeta: ObjectMeta{Name: "x"}}) },
		"wrong type":     func(o *Outcome) { o.ApplyAs(cmGVK, widget{TypeMeta: TypeMeta{Kind: "Widget"}}) },
		"not an object":  func(o *Outcome) { o.ApplyAs(cmGVK, []int{1}) },
		"status array":   func(o *Outcome) { o.Status([]int{1}) },
		"event type":     func(o *Outcome) { o.Event(Event{Type: "Info", Reason: "R"}) },
	} {
		r := widgets{func(*widget, *Context) (*Outcome, error) {
			o := NewOutcome()
			build(o)
			return o, nil
		}}
		if f := Run[widget](r, primary, nil).Failure; f == nil || f.Retry {
			t.Errorf("%s: got %+v", name, f)
		}
	}
}

func TestApplyAsKeepsAMatchingTypeAndAcceptsAPartialOne(t *testing.T) {
	o := NewOutcome().
		ApplyAs(cmGVK, configMap{TypeMeta: TypeMeta{"v1", "ConfigMap"}, ObjectMeta: ObjectMeta{Name: "a"}}).
		ApplyAs(cmGVK, configMap{TypeMeta: TypeMeta{Kind: "ConfigMap"}, ObjectMeta: ObjectMeta{Name: "b"}})
	w, err := o.wire()
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b"} {
		var cm configMap
		if err := json.Unmarshal([]byte(w.apply[i]), &cm); err != nil || cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Name != name {
			t.Errorf("%s: %s", name, w.apply[i])
		}
	}
}

func TestListersReadTheCacheAsTheHostAnswers(t *testing.T) {
	other := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"other","labels":{"app":"a"}}}`
	bad := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad","namespace":"ns","labels":{"app":"b","tier":"web"}},"data":{"k":1}}`
	cache := NewFakeCache(mine("a"), other, bad,
		configMap{TypeMeta{"v1", "ConfigMap"}, ObjectMeta{Name: "b", Namespace: "ns", Labels: map[string]string{"app": "a", "tier": "web"}}, nil})
	r := widgets{func(w *widget, ctx *Context) (*Outcome, error) {
		cms := NewLister[configMap](ctx, cmGVK)
		if cm, err := cms.Get("ns", "a"); err != nil || cm.Name != "a" {
			t.Errorf("get a: %v %v", cm, err)
		}
		if cm, err := cms.Get("", "b"); err != nil || cm.Labels["tier"] != "web" {
			t.Errorf("get b in the primary's namespace: %v %v", cm, err)
		}
		if _, err := cms.Get("ns", "x"); !IsNotFound(err) || err.Error() != `ConfigMap "ns/x" not found` {
			t.Errorf("get x: %v", err)
		}
		if _, err := cms.Get("ns", "bad"); err == nil || IsNotFound(err) {
			t.Errorf("get bad: %v", err)
		}
		for sel, want := range map[string]int{"app=a": 1, "app=a,tier in (web)": 1, "!app": 1, "tier notin (web)": 1, "app in (": 0} {
			if got, err := cms.List("ns", sel); err != nil || len(got) != want {
				t.Errorf("list ns %q: %d, %v (want %d)", sel, len(got), err, want)
			}
		}
		if _, err := cms.List("ns", "app=b"); err == nil {
			t.Error("list of an object that does not decode: no error")
		}
		if got, _ := cms.List("", "app=a"); len(got) != 2 {
			t.Errorf("list all namespaces: %d", len(got))
		}
		owned, err := Owned[configMap](ctx, cmGVK)
		if err != nil || len(owned) != 1 || owned[0].Name != "a" {
			t.Errorf("owned: %+v %v", owned, err)
		}
		if len(ctx.OwnedJSON()) != 1 || !strings.Contains(string(ctx.PrimaryJSON()), `"uid":"u1"`) {
			t.Errorf("raw: %s / %s", ctx.OwnedJSON(), ctx.PrimaryJSON())
		}
		Infof("read %d", 3)
		return nil, nil
	}}
	res := Run[widget](r, primary, cache)
	if res.Failure != nil || res.Apply != nil || res.Status != nil {
		t.Errorf("nil outcome: %+v", res)
	}
	if len(res.Log) != 1 || res.Log[0] != (LogLine{LevelInfo, "read 3"}) {
		t.Errorf("log: %+v", res.Log)
	}
}

func TestIsControlledByFollowsTheControllerReference(t *testing.T) {
	yes, no := true, false
	owner := &ObjectMeta{UID: "u1"}
	for refs, want := range map[string]bool{
		"u1 controller": true, "u1 not controller": false, "u2 controller": false, "none": false,
	} {
		o := &ObjectMeta{}
		switch refs {
		case "u1 controller":
			o.OwnerReferences = []OwnerReference{{UID: "u1", Controller: &yes}}
		case "u1 not controller":
			o.OwnerReferences = []OwnerReference{{UID: "u1", Controller: &no}}
		case "u2 controller":
			o.OwnerReferences = []OwnerReference{{UID: "u1"}, {UID: "u2", Controller: &yes}}
		}
		if got := IsControlledBy(o, owner); got != want {
			t.Errorf("%s: %v", refs, got)
		}
	}
	if IsControlledBy(&ObjectMeta{OwnerReferences: []OwnerReference{{Controller: &yes}}}, &ObjectMeta{}) {
		t.Error("an owner without a UID controls nothing")
	}
}
