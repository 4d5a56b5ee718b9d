package armresource

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/api/shared"
)

func TestPlan(t *testing.T) {
	cases := []struct {
		name string
		ann  map[string]string
		g    gathered
		want step
	}{
		{"first create", nil, gathered{hash: "h1", confirmed: true}, stepPut},
		{"spec changed", map[string]string{AnnotationAppliedHash: "h0"}, gathered{hash: "h1", confirmed: true}, stepPut},
		{"applied: read for drift", map[string]string{AnnotationAppliedHash: "h1"}, gathered{hash: "h1", confirmed: true}, stepRead},
		// Written with the finalizer before a PUT whose answer status never recorded.
		{"hash written ahead, unconfirmed", map[string]string{AnnotationAppliedHash: "h1"}, gathered{hash: "h1"}, stepPut},
		{"running operation", map[string]string{AnnotationAppliedHash: "h0"}, gathered{hash: "h1", token: "t", confirmed: true}, stepResume},
	}
	for _, tc := range cases {
		if got := plan(tc.ann, tc.g); got != tc.want {
			t.Errorf("%s: plan = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestNextStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	orig := map[string]any{"id": "/old", "location": "westeurope"}
	arm := map[string]any{"id": "/new"}
	failing := Outcome{Status: metav1.ConditionFalse, Severity: shared.SeverityWarning, Reason: shared.ReasonReconciliationFailure, Message: "m"}

	next, transition, err := nextStatus(orig, nil, false, failing, 3, now)
	if err != nil || !transition || next["id"] != "/old" || next["location"] != "westeurope" {
		t.Fatalf("no ARM view keeps the old status: %v %v %v", next, transition, err)
	}
	conds := conditionsOf(next)
	if len(conds) != 1 || conds[0].Severity != shared.SeverityWarning || conds[0].ObservedGeneration != 3 {
		t.Fatalf("conditions %+v", conds)
	}
	next, _, _ = nextStatus(next, arm, true, Outcome{Status: metav1.ConditionTrue, Reason: shared.ReasonSucceeded}, 3, now)
	if next["id"] != "/new" || next["location"] != nil {
		t.Fatalf("a fresh ARM view replaces the status: %v", next)
	}
	_, transition, _ = nextStatus(next, arm, true, Outcome{Status: metav1.ConditionTrue, Reason: shared.ReasonSucceeded}, 3, now.Add(time.Hour))
	if transition {
		t.Fatal("the same Ready is no transition")
	}
}

func TestMatchesSpec(t *testing.T) {
	r := New(nil, Options{Kind: mustKind(t, "Vault")})
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "v1"}, "spec": map[string]any{}}}
	for id, want := range map[string]bool{
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/v1":     true,
		"/subscriptions/s/resourceGroups/other/providers/Microsoft.KeyVault/vaults/v1":  true, // the owner is gone: its group is unknown
		"/subscriptions/s2/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/v1":    false,
		"/subscriptions/s/resourceGroups/victim":                                        false,
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/victim": false,
		"": false,
	} {
		if got := r.matchesSpec(id, obj, "s"); got != want {
			t.Errorf("matchesSpec(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestCycleMessage(t *testing.T) {
	if got := cycleMessage([]string{"RoleAssignment a", "RoleAssignment a"}); got != "RoleAssignment a names itself as its owner" {
		t.Errorf("self: %q", got)
	}
	if got := cycleMessage([]string{"RoleAssignment a", "RoleAssignment b", "RoleAssignment a"}); got != "the owners form a cycle: RoleAssignment a → RoleAssignment b → RoleAssignment a" {
		t.Errorf("cycle: %q", got)
	}
}

func mustKind(t *testing.T, kind string) Kind {
	t.Helper()
	for _, k := range Kinds() {
		if k.GVK.Kind == kind {
			return k
		}
	}
	t.Fatalf("no kind %s", kind)
	return Kind{}
}
