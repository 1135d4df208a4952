// Native tests of the Go config-sync (go test), through the SDK's Run, RunFinalize and FakeCache.
// The shared fixtures (../fixtures) check the component through `kwop plugin test`.

package main

import (
	"strings"
	"testing"
	"time"

	"kwop.dev/guest"
)

const cs = `{"apiVersion":"examples.kwop.dev/v1alpha1","kind":"ConfigSync","metadata":{"name":"app","uid":"cs-1","generation":2},
 "spec":{"source":{"kind":"ConfigMap","namespace":"platform","name":"app"},"namespaceSelector":{"matchLabels":{"sync":"yes"}}}}`

func ns(name string, labels string) string {
	return `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + name + `","labels":{` + labels + `}}}`
}

const source = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"platform"},"data":{"k":"v"}}`

func ours(namespace string) string {
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"` + namespace + `","labels":{"kwop.dev/owner-uid":"cs-1"}}}`
}

func cache(objects ...any) *guest.FakeCache {
	c := guest.NewFakeCache(objects...)
	c.Now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return c
}

func TestCopiesToSelectedNamespacesOnlyAndDeletesUnselectedCopies(t *testing.T) {
	r := guest.Run[ConfigSync](ConfigSyncPlugin{}, cs, cache(source, ns("a", `"sync":"yes"`), ns("b", `"sync":"no"`),
		ns("platform", `"sync":"yes"`), ours("b")))
	if r.Failure != nil || len(r.Apply) != 1 || !strings.Contains(string(r.Apply[0]), `"namespace":"a"`) {
		t.Fatalf("%+v", r)
	}
	if len(r.Delete) != 1 || r.Delete[0].Namespace != "b" {
		t.Fatalf("delete %+v", r.Delete)
	}
	if !strings.Contains(string(r.Status), `"synced":1`) || !strings.Contains(string(r.Status), `"reason":"Synced"`) {
		t.Fatalf("status %s", r.Status)
	}
}

func TestAForeignObjectIsAConflictAndAMissingSourceKeepsTheCopies(t *testing.T) {
	foreign := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"a"}}`
	r := guest.Run[ConfigSync](ConfigSyncPlugin{}, cs, cache(source, ns("a", `"sync":"yes"`), foreign))
	if r.Failure != nil || len(r.Apply) != 0 || !strings.Contains(string(r.Status), `"conflicts":["a"]`) ||
		r.Events[0].Reason != ErrResourceExists {
		t.Fatalf("%+v %s", r, r.Status)
	}
	r = guest.Run[ConfigSync](ConfigSyncPlugin{}, cs, cache(ns("a", `"sync":"yes"`), ours("a")))
	if r.Failure != nil || len(r.Apply) != 0 || len(r.Delete) != 0 || !strings.Contains(string(r.Status), SourceNotFound) {
		t.Fatalf("%+v %s", r, r.Status)
	}
}

func TestFinalizeDeletesEveryCopy(t *testing.T) {
	r := guest.RunFinalize[ConfigSync](ConfigSyncPlugin{}, cs, cache(ours("a"), ours("b")))
	if r.Failure != nil || !r.Done || len(r.Delete) != 2 || r.Events[0].Message != "deleted 2 copies" {
		t.Fatalf("%+v", r)
	}
}

func TestABadSelectorIsAnInvalidSpec(t *testing.T) {
	bad := strings.Replace(cs, `{"matchLabels":{"sync":"yes"}}`, `{"matchExpressions":[{"key":"x","operator":"Near"}]}`, 1)
	r := guest.Run[ConfigSync](ConfigSyncPlugin{}, bad, cache(source))
	if r.Failure != nil || len(r.Events) != 1 || r.Events[0].Reason != InvalidSpec ||
		!strings.Contains(r.Events[0].Message, `spec.namespaceSelector.matchExpressions[0].operator: "Near" is not a valid operator`) {
		t.Fatalf("%+v", r)
	}
}
