package armid

import "testing"

// BenchmarkParse measures the resource-id parser every ARM request goes through.
func BenchmarkParse(b *testing.B) {
	for _, tc := range []struct{ name, path string }{
		{"group", "/subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups/rg"},
		{"nested", "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app/federatedIdentityCredentials/k8s"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(tc.path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
