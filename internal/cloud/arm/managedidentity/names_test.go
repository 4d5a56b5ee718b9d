package managedidentity

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for name, want := range map[string]bool{
		"app": true, "App-1_x": true, strings.Repeat("a", 128): true,
		"ab": false, "-app": false, "_app": false, "a.b": false, strings.Repeat("a", 129): false,
	} {
		if got := identityName.MatchString(name); got != want {
			t.Errorf("identity name %q: %v", name, got)
		}
	}
	for name, want := range map[string]bool{
		"k8s": true, strings.Repeat("f", 120): true, "ab": false, strings.Repeat("f", 121): false, "f/x": false,
	} {
		if got := ficName.MatchString(name); got != want {
			t.Errorf("credential name %q: %v", name, got)
		}
	}
}

func TestValidateFIC(t *testing.T) {
	ok := ficProperties{Issuer: "https://issuer.example", Subject: "system:serviceaccount:a:b", Audiences: []string{"api://AzureADTokenExchange"}}
	if err := validateFIC("k8s", ok); err != nil {
		t.Fatal(err)
	}
	for _, p := range []ficProperties{
		{Issuer: "http://issuer.example", Subject: "s", Audiences: []string{"a"}},
		{Issuer: "https://", Subject: "s", Audiences: []string{"a"}},
		{Issuer: "https://i", Audiences: []string{"a"}},
		{Issuer: "https://i", Subject: strings.Repeat("s", 601), Audiences: []string{"a"}},
		{Issuer: "https://i", Subject: "s"},
		{Issuer: "https://i", Subject: "s", Audiences: []string{"a", "b"}},
		{Issuer: "https://i", Subject: "s", Audiences: []string{""}},
	} {
		if err := validateFIC("k8s", p); err == nil {
			t.Errorf("validateFIC accepted %+v", p)
		}
	}
}
