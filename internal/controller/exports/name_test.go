package exports_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/controller/exports"
)

var validName = regexp.MustCompile(`^[0-9a-z-]{1,127}$`)

func TestKeyVaultSecretName(t *testing.T) {
	for _, tc := range []struct{ kind, ns, name, want string }{
		{"UserAssignedIdentity", "team-a", "app-identity", "userassignedidentity-team-a-app-identity"},
		{"StorageAccount", "default", "data1", "storageaccount-default-data1"},
	} {
		if got := exports.KeyVaultSecretName(tc.kind, tc.ns, tc.name); got != tc.want {
			t.Errorf("KeyVaultSecretName(%q, %q, %q) = %q, want %q", tc.kind, tc.ns, tc.name, got, tc.want)
		}
	}
	// A "." (valid in Kubernetes names) is not valid in Key Vault: replaced, and a hash keeps
	// "a.b" and "a-b" apart.
	dot, dash := exports.KeyVaultSecretName("Vault", "ns", "a.b"), exports.KeyVaultSecretName("Vault", "ns", "a-b")
	if dot == dash || !strings.HasPrefix(dot, "vault-ns-a-b-") || !validName.MatchString(dot) {
		t.Errorf("a.b -> %q, a-b -> %q", dot, dash)
	}
	// Too long: cut to 127 with a hash; two names differing only past the cut stay apart.
	long := strings.Repeat("n", 250)
	a, b := exports.KeyVaultSecretName("Vault", "ns", long+"a"), exports.KeyVaultSecretName("Vault", "ns", long+"b")
	if len(a) != 127 || a == b || !validName.MatchString(a) {
		t.Errorf("long names: %q (%d), %q", a, len(a), b)
	}
	// The parts are hashed with their boundaries: moving a dash between parts changes the name.
	if exports.KeyVaultSecretName("k", "a.b", "c") == exports.KeyVaultSecretName("k", "a", "b.c") {
		t.Error("different parts give one name")
	}
}

// FuzzKeyVaultSecretName: whatever the parts (names come from users' manifests), the result is a
// valid Key Vault secret name, stable, and the plain join when that is already valid.
func FuzzKeyVaultSecretName(f *testing.F) {
	f.Add("UserAssignedIdentity", "team-a", "app")
	f.Add("Vault", "ns", "a.b")
	f.Add("", "", "")
	f.Add("Ünïcode", "ns", strings.Repeat("x", 300))
	f.Fuzz(func(t *testing.T, kind, ns, name string) {
		got := exports.KeyVaultSecretName(kind, ns, name)
		if !validName.MatchString(got) {
			t.Fatalf("KeyVaultSecretName(%q, %q, %q) = %q: not a valid secret name", kind, ns, name, got)
		}
		if again := exports.KeyVaultSecretName(kind, ns, name); again != got {
			t.Fatalf("not stable: %q then %q", got, again)
		}
		plain := strings.ToLower(kind + "-" + ns + "-" + name)
		if validName.MatchString(plain) && got != plain {
			t.Fatalf("valid name %q changed to %q", plain, got)
		}
	})
}
