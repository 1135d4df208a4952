// Native unit tests of the sync logic (`go test`), through the SDK's Run and FakeCache: the
// same code path as in the component, without WebAssembly. The conformance fixtures under
// tests/fixtures/foo check the same behaviours through the component (tests/tests/guests.rs).

package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"kwop.dev/guest"
)

func foo(deploymentName string, replicas *int32) string {
	spec := map[string]any{"deploymentName": deploymentName}
	if replicas != nil {
		spec["replicas"] = *replicas
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
		"metadata": map[string]any{"name": "test", "namespace": "default", "uid": "uid-foo"},
		"spec":     spec,
	})
	return string(b)
}

func deployment(ownerUID string, controller bool, available int32) string {
	refs := "[]"
	if ownerUID != "" {
		refs = fmt.Sprintf(`[{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","name":"test","uid":%q,"controller":%v,"blockOwnerDeletion":true}]`, ownerUID, controller)
	}
	return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"test","namespace":"default","ownerReferences":%s},
		"spec":{"replicas":1,"selector":{},"template":{}},"status":{"availableReplicas":%d}}`, refs, available)
}

func ptr(i int32) *int32 { return &i }

func sync(primary string, cache ...string) guest.Result {
	objects := make([]any, len(cache))
	for i, c := range cache {
		objects[i] = c
	}
	return guest.Run[Foo](GuestFoo{}, primary, guest.NewFakeCache(objects...))
}

func jsonEqual(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	_ = json.Unmarshal([]byte(want), &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func TestCreatesTheDeploymentSampleControllerWould(t *testing.T) {
	r := sync(foo("test", ptr(1)))
	if r.Failure != nil || len(r.Apply) != 1 {
		t.Fatalf("got %+v", r)
	}
	jsonEqual(t, "intent", r.Apply[0], `{"apiVersion":"apps/v1","kind":"Deployment",
		"metadata":{"name":"test","namespace":"default"},
		"spec":{"replicas":1,
			"selector":{"matchLabels":{"app":"nginx","controller":"test"}},
			"template":{"metadata":{"labels":{"app":"nginx","controller":"test"}},
				"spec":{"containers":[{"name":"nginx","image":"nginx:latest"}]}}}}`)
	jsonEqual(t, "status", r.Status, `{"availableReplicas":0}`)
	if want := []guest.Event{guest.Normal(SuccessSynced, MessageResourceSynced)}; !reflect.DeepEqual(r.Events, want) {
		t.Errorf("events %+v", r.Events)
	}
}

func TestUnsetReplicasStayUnset(t *testing.T) {
	r := sync(foo("test", nil))
	if r.Failure != nil || strings.Contains(string(r.Apply[0]), "replicas") {
		t.Fatalf("got %s %+v", r.Apply, r.Failure)
	}
}

func TestStatusCopiesAvailableReplicasOfTheOwnedDeployment(t *testing.T) {
	r := sync(foo("test", ptr(3)), deployment("uid-foo", true, 3))
	if r.Failure != nil {
		t.Fatal(r.Failure)
	}
	jsonEqual(t, "status", r.Status, `{"availableReplicas":3}`)
	var d Deployment
	if err := json.Unmarshal(r.Apply[0], &d); err != nil || d.Spec.Replicas == nil || *d.Spec.Replicas != 3 || d.Status != nil {
		t.Errorf("intent %s", r.Apply[0])
	}
}

func TestADeploymentThatIsNotOursIsLeftAloneAndReported(t *testing.T) {
	for name, d := range map[string]string{
		"no owner":              deployment("", false, 0),
		"another Foo":           deployment("uid-other", true, 0),
		"owner, not controller": deployment("uid-foo", false, 0),
	} {
		r := sync(foo("test", ptr(1)), d)
		f := r.Failure
		if f == nil || !f.Retry || f.Message != `Resource "test" already exists and is not managed by Foo` {
			t.Errorf("%s: got %+v", name, f)
			continue
		}
		if want := []guest.Event{guest.Warning(ErrResourceExists, f.Message)}; !reflect.DeepEqual(r.Events, want) {
			t.Errorf("%s: events %+v", name, r.Events)
		}
	}
}

func TestAMissingOrEmptyDeploymentNameIsAWarningWithoutRetry(t *testing.T) {
	for _, primary := range []string{foo("", ptr(1)), `{"metadata":{"name":"test","uid":"u"},"spec":{"deploymentName":null}}`, `{"metadata":{"name":"test"}}`} {
		r := sync(primary)
		if f := r.Failure; f == nil || f.Retry || f.Message != "spec.deploymentName is missing or empty: no Deployment to manage" {
			t.Errorf("%s: got %+v", primary, f)
		}
		if len(r.Events) != 1 || r.Events[0].Reason != InvalidSpec || r.Events[0].Type != guest.EventTypeWarning {
			t.Errorf("%s: events %+v", primary, r.Events)
		}
	}
}

func TestAnInvalidDeploymentNameIsAWarningWithoutRetry(t *testing.T) {
	for _, bad := range []string{"Has_Upper", "-lead", "trail-", "a..b", ".a", "a.", strings.Repeat("x", 254), "é"} {
		r := sync(foo(bad, ptr(1)))
		if f := r.Failure; f == nil || f.Retry || !strings.Contains(f.Message, "not a valid Deployment name") {
			t.Errorf("%q: got %+v", bad, f)
		}
	}
	if r := sync(foo("a.b-c.d9", ptr(1))); r.Failure != nil {
		t.Errorf("a.b-c.d9: %+v", r.Failure)
	}
	if r := sync(foo(strings.Repeat("x", 253), ptr(1))); r.Failure != nil {
		t.Errorf("253 characters: %+v", r.Failure)
	}
}

func TestNamesAreQuotedAsTheRustGuestQuotesThem(t *testing.T) {
	for in, want := range map[string]string{
		"Not_Valid":            `"Not_Valid"`,
		"tab\there":            `"tab\there"`,
		"q\"\\\x00\r\n":        `"q\"\\\0\r\n"`,
		"e\u0301":              `"e\u{301}"`, // Grapheme_Extend
		"nbsp\u00a0zwsp\u200b": `"nbsp\u{a0}zwsp\u{200b}"`,
		"bell\x07":             `"bell\u{7}"`,
		"日本 ok 'x'":            `"日本 ok 'x'"`,
	} {
		if got := debugQuote(in); got != want {
			t.Errorf("debugQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestAFooThatDoesNotParseIsAPermanentFailure(t *testing.T) {
	r := sync(`{"spec":"nope"}`)
	if r.Failure == nil || r.Failure.Retry {
		t.Fatalf("got %+v", r.Failure)
	}
}

func TestInfoDeclaresFooAndDeployments(t *testing.T) {
	i := GuestFoo{}.Info()
	if i.Name != "guest-foo-go" || i.Primary.Kind != "Foo" || len(i.Owns) != 1 || i.Owns[0] != deploymentGVK || len(i.Reads) != 0 {
		t.Fatalf("got %+v", i)
	}
}
