package controlplaneidentities

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func file(clientID string) hcpcredentials.File {
	return hcpcredentials.File{ClientID: clientID, NotBefore: t0, NotAfter: t0.Add(90 * 24 * time.Hour),
		RenewAfter: t0.Add(45 * 24 * time.Hour), CannotRenewAfter: t0.Add(81 * 24 * time.Hour)}
}

func TestRenewal(t *testing.T) {
	f := file("a")
	for name, tc := range map[string]struct {
		cur  *hcpcredentials.File
		id   string
		now  time.Time
		want string
	}{
		"nothing stored":       {nil, "a", t0, "no credentials stored yet"},
		"fresh":                {&f, "a", t0.Add(time.Hour), ""},
		"identity changed":     {&f, "b", t0.Add(time.Hour), "identity changed"},
		"client id case":       {&f, "A", t0.Add(time.Hour), ""},
		"at renew_after":       {&f, "a", f.RenewAfter, "renew_after reached"},
		"past renew_after":     {&f, "a", f.RenewAfter.Add(time.Second), "renew_after reached"},
		"just before renewing": {&f, "a", f.RenewAfter.Add(-time.Second), ""},
	} {
		if got := renewal(tc.cur, tc.id, tc.now); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

func TestStored(t *testing.T) {
	if stored("") != nil || stored("{") != nil || stored(`{"client_id":"a"}`) != nil || stored(`"text"`) != nil {
		t.Error("a value that is not credentials JSON was taken as credentials")
	}
	got := stored(`{"client_id":"a","not_before":"2026-11-01T00:00:00Z","not_after":"2027-01-30T00:00:00Z","renew_after":"2026-12-16T00:00:00Z"}`)
	if got == nil || got.ClientID != "a" || !got.RenewAfter.Equal(t0.Add(45*24*time.Hour)) {
		t.Errorf("stored %+v", got)
	}
}

func TestUsable(t *testing.T) {
	f := file("a")
	if err := usable(f, t0.Add(time.Hour)); err != nil {
		t.Errorf("fresh credentials refused: %v", err)
	}
	for name, tc := range map[string]struct {
		f    func(hcpcredentials.File) hcpcredentials.File
		now  time.Time
		want string
	}{
		"at cannot_renew_after":   {func(f hcpcredentials.File) hcpcredentials.File { return f }, f.CannotRenewAfter, "cannot_renew_after"},
		"past cannot_renew_after": {func(f hcpcredentials.File) hcpcredentials.File { return f }, f.CannotRenewAfter.Add(time.Hour), "cannot_renew_after"},
		"no times":                {func(f hcpcredentials.File) hcpcredentials.File { f.RenewAfter = time.Time{}; return f }, t0, "lacks"},
		"out of order": {func(f hcpcredentials.File) hcpcredentials.File {
			f.RenewAfter = f.CannotRenewAfter.Add(time.Hour)
			return f
		}, t0, "out of order"},
	} {
		err := usable(tc.f(f), tc.now)
		if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

func TestDesiredSPCSpec(t *testing.T) {
	spec := desiredSPCSpec("managed-azure-kms", "kv-hcp", "tenant", "reader")
	want := map[string]string{"usePodIdentity": "false", "useVMManagedIdentity": "true", "userAssignedIdentityID": "reader",
		"keyvaultName": "kv-hcp", "tenantId": "tenant", "objects": "array:\n  - |\n    objectName: managed-azure-kms\n    objectEncoding: utf-8\n    objectType: secret\n"}
	if spec.Provider != "azure" || len(spec.Parameters) != len(want) || spec.SecretObjects != nil {
		t.Fatalf("spec %+v", spec)
	}
	for k, v := range want {
		if spec.Parameters[k] != v {
			t.Errorf("%s = %q, want %q", k, spec.Parameters[k], v)
		}
	}
}

func TestRequeueAfter(t *testing.T) {
	ra := metav1.NewTime(t0.Add(time.Minute))
	comps := []cpv1.ComponentStatus{{Name: cpv1.ComponentCPO, RenewAfter: &ra}, {Name: cpv1.ComponentKMS}}
	if d := requeueAfter(comps, t0, time.Hour); d != time.Minute {
		t.Errorf("requeue %v, want the time to renew_after", d)
	}
	if d := requeueAfter(comps, t0, 10*time.Second); d != 10*time.Second {
		t.Errorf("requeue %v, want the resync", d)
	}
	if d := requeueAfter(comps, t0.Add(time.Hour), time.Hour); d != time.Second {
		t.Errorf("requeue %v past renew_after, want the floor", d)
	}
}

func TestOverall(t *testing.T) {
	ok := metav1.Condition{Type: cpv1.ConditionReady, Status: metav1.ConditionTrue, Reason: cpv1.ReasonSucceeded}
	bad := metav1.Condition{Type: cpv1.ConditionReady, Status: metav1.ConditionFalse, Reason: cpv1.ReasonKeyVaultForbidden, Message: "403"}
	st, reason, msg := overall([]cpv1.ComponentStatus{{Name: cpv1.ComponentCPO, Conditions: []metav1.Condition{ok}}, {Name: cpv1.ComponentKMS, Conditions: []metav1.Condition{bad}}})
	if st != metav1.ConditionFalse || reason != cpv1.ReasonKeyVaultForbidden || !strings.Contains(msg, "managed-azure-kms: 403") {
		t.Errorf("overall %s %s %s", st, reason, msg)
	}
	if st, _, _ := overall([]cpv1.ComponentStatus{{Name: cpv1.ComponentCPO, Conditions: []metav1.Condition{ok}}}); st != metav1.ConditionTrue {
		t.Errorf("overall %s", st)
	}
}
