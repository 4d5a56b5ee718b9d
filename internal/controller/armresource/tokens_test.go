package armresource

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
)

func tokenWith(fields map[string]string) string {
	b, _ := json.Marshal(map[string]any{"type": "json.RawMessage", "token": fields})
	return string(b)
}

func TestCheckToken(t *testing.T) {
	r := New(nil, Options{ARM: &arm.ClientOptions{}})
	r.opts.ARM.Cloud = cloud.Configuration{Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
		cloud.ResourceManager: {Endpoint: "https://127.0.0.1:8443/", Audience: "x"}}}
	const (
		id  = "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/v"
		arm = "https://127.0.0.1:8443"
	)
	cases := []struct {
		name   string
		fields map[string]string
		ok     bool
	}{
		{"ARM's operation", map[string]string{"asyncURL": arm + "/subscriptions/s1/providers/Microsoft.Resources/operationStatuses/op1?api-version=2023-07-01",
			"locURL": arm + "/subscriptions/s1/providers/Microsoft.Resources/operationResults/op1?api-version=2023-07-01", "origURL": arm + id + "?api-version=2023-07-01", "method": "PUT"}, true},
		{"provider's location operation", map[string]string{"asyncURL": arm + "/subscriptions/s1/providers/Microsoft.KeyVault/locations/westeurope/operationResults/op1"}, true},
		{"in the resource group", map[string]string{"asyncURL": arm + "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.KeyVault/asyncoperations/op1"}, true},
		{"the resource itself", map[string]string{"pollURL": arm + id + "?api-version=2023-07-01"}, true},
		{"another host", map[string]string{"asyncURL": "https://127.0.0.1:9999/subscriptions/s1/providers/Microsoft.Resources/operationStatuses/op1"}, false},
		{"any HTTPS host", map[string]string{"pollURL": "https://evil.example/x"}, false},
		{"plain HTTP", map[string]string{"asyncURL": "http://127.0.0.1:8443/subscriptions/s1/providers/Microsoft.Resources/operationStatuses/op1"}, false},
		{"another subscription", map[string]string{"asyncURL": arm + "/subscriptions/s2/providers/Microsoft.Resources/operationStatuses/op1"}, false},
		{"another resource group", map[string]string{"pollURL": arm + "/subscriptions/s1/resourceGroups/victim"}, false},
		{"another group's operation", map[string]string{"asyncURL": arm + "/subscriptions/s1/resourceGroups/victim/providers/Microsoft.KeyVault/operationResults/op1"}, false},
		{"another provider", map[string]string{"asyncURL": arm + "/subscriptions/s1/providers/Microsoft.Compute/locations/x/operations/op1"}, false},
		{"the admin API", map[string]string{"asyncURL": arm + "/admin/state"}, false},
		{"a dot segment", map[string]string{"asyncURL": arm + "/subscriptions/s1/providers/Microsoft.Resources/operationStatuses/../../../resourceGroups/victim"}, false},
		{"an encoded slash", map[string]string{"asyncURL": arm + "/subscriptions/s1/providers/Microsoft.Resources/operationStatuses/a%2Fb"}, false},
		{"user info", map[string]string{"asyncURL": "https://u:p@127.0.0.1:8443/subscriptions/s1/providers/Microsoft.Resources/operationStatuses/op1"}, false},
		{"good and bad", map[string]string{"asyncURL": arm + "/subscriptions/s1/providers/Microsoft.Resources/operationStatuses/op1", "locURL": "https://evil.example/x"}, false},
		{"no URL", map[string]string{"method": "PUT"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := r.checkToken(tokenWith(tc.fields), id, "Microsoft.KeyVault/vaults")
			if tc.ok != (err == nil) {
				t.Fatalf("checkToken: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, errToken) {
				t.Fatalf("error %v does not wrap errToken", err)
			}
		})
	}
	if err := r.checkToken("not json", id, "Microsoft.KeyVault/vaults"); err == nil {
		t.Fatal("a token that is not JSON was accepted")
	}
}
