package armresource

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

func TestARMBodyFlattensAndResolvesFromConfig(t *testing.T) {
	spec := map[string]any{
		"azureName": "x", "owner": map[string]any{"name": "rg"}, "operatorSpec": map[string]any{},
		"location": "westus2", "tags": map[string]any{"a": "b"},
		"principalIdFromConfig": map[string]any{"name": "ids", "key": "principalId"},
		"principalType":         "ServicePrincipal",
		"unknownAsoField":       true,
	}
	body, err := armBody(spec, true, func(name, key string) (string, error) {
		if name != "ids" || key != "principalId" {
			t.Fatalf("lookup %s/%s", name, key)
		}
		return "p-1", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"location": "westus2", "tags": map[string]any{"a": "b"},
		"properties": map[string]any{"principalId": "p-1", "principalType": "ServicePrincipal", "unknownAsoField": true},
	}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body = %#v\nwant %#v", body, want)
	}
	if _, still := spec["principalIdFromConfig"]; !still {
		t.Fatal("armBody modified the spec")
	}
}

func TestARMBodyNestedFromConfigAndMissingValue(t *testing.T) {
	spec := map[string]any{"properties": map[string]any{
		"tenantIdFromConfig": map[string]any{"name": "ids", "key": "tenantId"},
		"accessPolicies":     []any{map[string]any{"objectIdFromConfig": map[string]any{"name": "ids", "key": "principalId"}}},
	}}
	body, err := armBody(spec, false, func(_, key string) (string, error) { return "v-" + key, nil })
	if err != nil {
		t.Fatal(err)
	}
	props := body["properties"].(map[string]any)
	if props["tenantId"] != "v-tenantId" || props["accessPolicies"].([]any)[0].(map[string]any)["objectId"] != "v-principalId" {
		t.Fatalf("nested references not resolved: %#v", props)
	}
	_, err = armBody(spec, false, func(string, string) (string, error) { return "", errConfigMap })
	if !errors.Is(err, errConfigMap) {
		t.Fatalf("missing value: %v", err)
	}
	if refs := configMapRefs(spec); !reflect.DeepEqual(refs, []string{"ids", "ids"}) {
		t.Fatalf("configMapRefs = %v", refs)
	}
}

func TestDrift(t *testing.T) {
	desired := map[string]any{"location": "westus2", "tags": map[string]any{"app": "x"},
		"properties": map[string]any{"createMode": "default", "sku": map[string]any{"name": "standard"}, "days": int64(7)}}
	cases := []struct {
		name   string
		actual map[string]any
		want   string
	}{
		{"same, location spelled by ARM, write-only field absent", map[string]any{"location": "West US 2", "tags": map[string]any{"app": "x"},
			"properties": map[string]any{"sku": map[string]any{"name": "Standard", "family": "A"}, "days": float64(7), "vaultUri": "https://x"}}, ""},
		{"tag removed", map[string]any{"location": "westus2", "tags": map[string]any{}, "properties": map[string]any{}}, "tags"},
		{"property changed", map[string]any{"location": "westus2", "tags": map[string]any{"app": "x"}, "properties": map[string]any{"days": float64(9)}}, "properties.days"},
	}
	for _, tc := range cases {
		if got := drifted(desired, tc.actual); got != tc.want {
			t.Errorf("%s: drifted = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBodyHashStable(t *testing.T) {
	a := map[string]any{"location": "x", "tags": map[string]any{"a": "1", "b": "2"}}
	b := map[string]any{"tags": map[string]any{"b": "2", "a": "1"}, "location": "x"}
	if bodyHash(a) != bodyHash(b) {
		t.Fatal("equal bodies hash differently")
	}
	b["location"] = "y"
	if bodyHash(a) == bodyHash(b) {
		t.Fatal("different bodies hash the same")
	}
}

func TestStatusFromARMLiftsProperties(t *testing.T) {
	res := map[string]any{"id": "/x", "properties": map[string]any{"clientId": "c", "principalId": "p"}}
	got := statusFromARM(res, true)
	if got["clientId"] != "c" || got["id"] != "/x" || got["properties"] != nil {
		t.Fatalf("flattened status %#v", got)
	}
	if kept := statusFromARM(res, false); kept["properties"] == nil {
		t.Fatal("unflattened status lost properties")
	}
}

func respErr(status int, retryAfter string) error {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return &azcore.ResponseError{StatusCode: status, RawResponse: &http.Response{StatusCode: status, Header: h}}
}

func TestSetReadyTransitions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	conds, transition := setReady(nil, Outcome{Status: metav1.ConditionFalse, Severity: shared.SeverityInfo, Reason: shared.ReasonReconciling, Message: "a"}, 1, t0)
	if !transition || len(conds) != 1 {
		t.Fatalf("first condition: %v %v", conds, transition)
	}
	conds, transition = setReady(conds, Outcome{Status: metav1.ConditionFalse, Severity: shared.SeverityInfo, Reason: shared.ReasonReconciling, Message: "b"}, 1, t0.Add(time.Minute))
	if transition || !conds[0].LastTransitionTime.Time.Equal(t0) || conds[0].Message != "b" {
		t.Fatalf("message-only change: %v %v", conds, transition)
	}
	conds, transition = setReady(conds, Outcome{Status: metav1.ConditionTrue, Reason: shared.ReasonSucceeded}, 2, t0.Add(2*time.Minute))
	if !transition || conds[0].ObservedGeneration != 2 || !conds[0].LastTransitionTime.Time.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("to Ready: %v %v", conds, transition)
	}
}
