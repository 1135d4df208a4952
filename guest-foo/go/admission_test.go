// Native tests of Validate (the same cases as tests/fixtures/foo-validate, which the component
// passes through `kwop plugin test`).

package main

import (
	"strings"
	"testing"

	"kwop.dev/guest"
)

func admit(op guest.Operation, object, old string, cache ...any) guest.ValidateResult {
	if old == "" {
		return guest.RunValidate[Foo](GuestFoo{}, op, object, nil, guest.NewFakeCache(cache...))
	}
	return guest.RunValidate[Foo](GuestFoo{}, op, object, old, guest.NewFakeCache(cache...))
}

func TestValidateAllowsAValidFoo(t *testing.T) {
	if r := admit(guest.Create, foo("test", ptr(1)), ""); !r.Allowed() || len(r.Warnings) != 0 {
		t.Fatalf("%+v", r)
	}
	if r := admit(guest.Update, foo("test", ptr(1)), foo("test", ptr(2)), deployment("uid-foo", true, 1)); !r.Allowed() {
		t.Fatalf("its own Deployment: %+v", r)
	}
}

func TestValidateRefusesBadDeploymentNames(t *testing.T) {
	for name, c := range map[string]struct{ object, want string }{
		"missing": {foo("", nil), "is required: the name of the Deployment this Foo manages"},
		"invalid": {foo("Web_App", nil), `"Web_App" is not a valid Deployment name: must consist of lower case`},
		"foreign": {foo("test", nil), `Deployment "test" already exists in namespace "default" and is not managed by this Foo`},
	} {
		r := admit(guest.Create, c.object, "", deployment("someone-else", true, 0))
		if r.Allowed() || len(r.Violations) != 1 || r.Violations[0].Field != "spec.deploymentName" ||
			!strings.Contains(r.Violations[0].Message, c.want) {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

func TestAnUpdateLeavingSpecAloneIsWarnedNotRefused(t *testing.T) {
	r := admit(guest.Update, foo("test", ptr(1)), foo("test", ptr(1)), deployment("", false, 0))
	if !r.Allowed() || len(r.Warnings) != 1 || !strings.HasPrefix(r.Warnings[0], "spec.deploymentName: Deployment") {
		t.Fatalf("%+v", r)
	}
	if r := admit(guest.Update, foo("test", ptr(2)), foo("test", ptr(1)), deployment("", false, 0)); r.Allowed() {
		t.Fatalf("a spec change is refused: %+v", r)
	}
}
