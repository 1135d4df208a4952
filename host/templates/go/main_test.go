package main

import (
	"strings"
	"testing"

	"kwop.dev/guest"
)

const foo = `{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo",
  "metadata":{"name":"example","namespace":"default","uid":"u1"},"spec":{"deploymentName":"web","replicas":2}}`

func TestWritesTheConfigMap(t *testing.T) {
	r := guest.Run[Foo](Plugin{}, foo, nil)
	if r.Failure != nil || len(r.Apply) != 1 {
		t.Fatalf("got %s, %v", r.Apply, r.Failure)
	}
	got := string(r.Apply[0])
	for _, want := range []string{`"name":"example-info"`, `"deploymentName":"web"`, `"replicas":"2"`} {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %s", got, want)
		}
	}
}

func TestAnEmptyDeploymentNameIsNotRetried(t *testing.T) {
	r := guest.Run[Foo](Plugin{}, `{"metadata":{"name":"example"},"spec":{}}`, nil)
	if r.Failure == nil || r.Failure.Retry || len(r.Events) == 0 || r.Events[0].Reason != "InvalidSpec" {
		t.Fatalf("got %+v", r)
	}
}

const deleting = `{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo",
  "metadata":{"name":"example","namespace":"default","uid":"u1","deletionTimestamp":"2026-01-01T00:00:00Z"},
  "spec":{"deploymentName":"web"}}`

func TestFinalizeDeletesTheConfigMapAndIsDone(t *testing.T) {
	r := guest.RunFinalize[Foo](Plugin{}, deleting, nil)
	if r.Failure != nil || !r.Done || len(r.Delete) != 1 || r.Delete[0].Name != "example-info" {
		t.Fatalf("got %+v", r)
	}
}

func TestValidateRefusesAFooWithoutDeploymentName(t *testing.T) {
	r := guest.RunValidate[Foo](Plugin{}, guest.Create, `{"metadata":{"name":"example"},"spec":{}}`, nil, nil)
	if r.Allowed() || len(r.Violations) != 1 || r.Violations[0].Field != "spec.deploymentName" {
		t.Fatalf("got %+v", r)
	}
	if r := guest.RunValidate[Foo](Plugin{}, guest.Create, foo, nil, nil); !r.Allowed() {
		t.Fatalf("a good Foo: %+v", r)
	}
}
