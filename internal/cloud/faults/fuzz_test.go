package faults

import (
	"errors"
	"testing"
)

// FuzzParse: any input either parses to a configuration that validates and an injector
// accepts, or is refused as ErrInvalid; nothing panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`rules: [{method: PUT, resourceType: Microsoft.ManagedIdentity/userAssignedIdentities, status: 503, count: 2}]`,
		`{"seed":3,"rules":[{"resourceType":"keyvault","status":429,"rate":0.5,"retryAfter":"10ms"}]}`,
		`rules: [{method: DELETE, lro: {polls: 3, result: Failed}}]`,
		`rules: [{latency: 1}]`, `rules: null`, `[]`, `seed: -1`, "\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		i := New()
		if err := i.Set(c); err != nil {
			t.Fatalf("parsed configuration refused by Set: %v", err)
		}
		i.Decide(Request{Service: ServiceARM, Method: "PUT", ResourceType: "Microsoft.Resources/resourceGroups"})
	})
}
