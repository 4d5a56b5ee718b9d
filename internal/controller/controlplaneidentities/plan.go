package controlplaneidentities

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	secretsstorev1 "sigs.k8s.io/secrets-store-csi-driver/apis/v1"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// ErrUnusable reports credentials the manager will not store.
var ErrUnusable = errors.New("unusable credentials")

// stored reads the credentials JSON of a secret's value: only its times and ids are used
// (nil when the value is not credentials JSON).
func stored(value string) *hcpcredentials.File {
	var f hcpcredentials.File
	if value == "" || json.Unmarshal([]byte(value), &f) != nil || f.ClientID == "" || f.NotAfter.IsZero() {
		return nil
	}
	return &f
}

// renewal says whether a component needs new credentials, and why ("" when it does not). cur
// is what Key Vault holds (nil: nothing usable). Key Vault is the record: a status lost or read
// stale from a cache never causes a second issuance.
func renewal(cur *hcpcredentials.File, clientID string, now time.Time) string {
	switch {
	case cur == nil:
		return "no credentials stored yet"
	case !strings.EqualFold(cur.ClientID, clientID):
		return "the component's identity changed"
	case cur.RenewAfter.IsZero() || !now.Before(cur.RenewAfter):
		return "renew_after reached"
	}
	return ""
}

// usable checks credentials before they are stored: never past cannot_renew_after (a
// credential that can no longer be renewed must not become the one components follow), never
// expired, never with times out of order.
func usable(f hcpcredentials.File, now time.Time) error {
	switch {
	case f.NotBefore.IsZero() || f.NotAfter.IsZero() || f.RenewAfter.IsZero() || f.CannotRenewAfter.IsZero():
		return fmt.Errorf("%w: the data plane's answer lacks a validity time", ErrUnusable)
	case !now.Before(f.CannotRenewAfter):
		return fmt.Errorf("%w: past cannot_renew_after (%s) by the manager's clock (%s)", ErrUnusable, f.CannotRenewAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case !now.Before(f.NotAfter):
		return fmt.Errorf("%w: expired at %s", ErrUnusable, f.NotAfter.UTC().Format(time.RFC3339))
	case f.RenewAfter.After(f.CannotRenewAfter) || f.CannotRenewAfter.After(f.NotAfter):
		return fmt.Errorf("%w: renew_after, cannot_renew_after and not_after are out of order", ErrUnusable)
	}
	return nil
}

// ObjectsParameter is the SecretProviderClass's objects parameter: the one credentials secret,
// as the reference writes it.
func ObjectsParameter(secretName string) string {
	return "array:\n  - |\n    objectName: " + secretName + "\n    objectEncoding: utf-8\n    objectType: secret\n"
}

// Labels the manager puts on the SecretProviderClasses it owns.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "cerulean.dev/component"
	managedBy      = "cerulean"
)

// desiredSPCSpec is exactly the reference's SecretProviderClass of a component: the nodes'
// identity reads the one secret.
func desiredSPCSpec(secretName, vaultName, tenantID, readerClientID string) secretsstorev1.SecretProviderClassSpec {
	return secretsstorev1.SecretProviderClassSpec{
		Provider: "azure",
		Parameters: map[string]string{
			"usePodIdentity":         "false",
			"useVMManagedIdentity":   "true",
			"userAssignedIdentityID": readerClientID,
			"keyvaultName":           vaultName,
			"tenantId":               tenantID,
			"objects":                ObjectsParameter(secretName),
		},
	}
}

// requeueAfter is when to look again: at the earliest renew_after, at most resync from now.
func requeueAfter(comps []cpv1.ComponentStatus, now time.Time, resync time.Duration) time.Duration {
	d := resync
	for _, c := range comps {
		if c.RenewAfter == nil {
			continue
		}
		if until := c.RenewAfter.Sub(now); until < d {
			d = until
		}
	}
	if d < time.Second {
		d = time.Second
	}
	return d
}

// times copies the credentials' times into a component's status.
func times(st *cpv1.ComponentStatus, f hcpcredentials.File) {
	t := func(v time.Time) *metav1.Time { m := metav1.NewTime(v.UTC()); return &m }
	st.NotBefore, st.NotAfter, st.RenewAfter, st.CannotRenewAfter = t(f.NotBefore), t(f.NotAfter), t(f.RenewAfter), t(f.CannotRenewAfter)
}

// overall is the object's Ready condition from its components'.
func overall(comps []cpv1.ComponentStatus) (metav1.ConditionStatus, string, string) {
	var bad []string
	reason := cpv1.ReasonSucceeded
	for _, c := range comps {
		for _, cond := range c.Conditions {
			if cond.Type == cpv1.ConditionReady && cond.Status != metav1.ConditionTrue {
				if len(bad) == 0 {
					reason = cond.Reason
				}
				bad = append(bad, string(c.Name)+": "+cond.Message)
			}
		}
	}
	if len(bad) == 0 {
		return metav1.ConditionTrue, reason, fmt.Sprintf("%d components have current credentials and SecretProviderClasses", len(comps))
	}
	return metav1.ConditionFalse, reason, strings.Join(bad, "; ")
}
