package armgrants_test

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cerulean/cerulean/internal/webhook/armgrants"
)

// With the scope checks off (--allow-ungranted-scopes), the check still refuses an export
// expression that does not compile and admits any scope without reading a grant: its readers
// are nil here, so a read would panic.
func TestScopesOffStillRefusesBadExpressions(t *testing.T) {
	v := &armgrants.Validator{AllowUngrantedScopes: true}
	request := func(expr string) admission.Request {
		obj := map[string]any{
			"apiVersion": "authorization.azure.com/v1api20220401", "kind": "RoleAssignment",
			"metadata": map[string]any{"namespace": "tenant", "name": "reader"},
			"spec": map[string]any{
				"owner":                   map[string]any{"armId": "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/other-team"},
				"principalId":             "00000000-0000-0000-0000-000000000002",
				"roleDefinitionReference": map[string]any{"wellKnownName": "Reader"},
				"operatorSpec": map[string]any{"configMapExpressions": []any{
					map[string]any{"name": "ids", "key": "id", "value": expr}}},
			},
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
			Namespace: "tenant", Object: runtime.RawExtension{Raw: raw}}}
	}
	if r := v.Handle(t.Context(), request("self.status.id +")); r.Allowed || !strings.Contains(r.Result.Message, "self.status.id +") {
		t.Errorf("an expression that does not compile: allowed=%v %q", r.Allowed, r.Result.Message)
	}
	if r := v.Handle(t.Context(), request("self.status.id")); !r.Allowed {
		t.Errorf("an ungranted scope with the checks off: refused: %q", r.Result.Message)
	}
}
