package entra

import (
	"strings"
	"testing"
)

// TestNewSecretValueIsNeverAnOption: a secret that starts with '-' breaks `az login -p "$SECRET"`
// (seen as a flaky CLI test: about one secret in 64 did).
func TestNewSecretValueIsNeverAnOption(t *testing.T) {
	seen := map[string]bool{}
	for range 5000 {
		v := NewSecretValue()
		if strings.HasPrefix(v, "-") || len(v) != 40 {
			t.Fatalf("secret %q: want 40 characters not starting with '-'", v)
		}
		seen[v] = true
	}
	if len(seen) != 5000 {
		t.Errorf("%d distinct secrets of 5000", len(seen))
	}
}
