package csiprovider

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func attrs(kv ...string) string {
	m := map[string]string{"keyvaultName": "kv-app", "objects": "array:\n  - |\n    objectName: a\n"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestParseMount(t *testing.T) {
	perm, _ := json.Marshal(os.FileMode(0o644))
	sp := `{"clientid":"c","clientsecret":"s"}`
	m, err := parseMount(attrs("tenantId", "old", "tenantID", "new"), sp, string(perm))
	if err != nil {
		t.Fatal(err)
	}
	if m.tenantID != "new" || m.mode != AuthServicePrincipal || m.permission != 0o644 || m.clientID != "c" {
		t.Errorf("mount %+v", m)
	}
	m, err = parseMount(attrs("tenantId", "t", "useVMManagedIdentity", "TRUE", "userAssignedIdentityID", " id "), "", string(perm))
	if err != nil || m.mode != AuthVMManagedIdentity || m.userAssigned != "id" {
		t.Errorf("VM identity: %+v %v", m, err)
	}
	m, err = parseMount(attrs("tenantId", "t", "usePodIdentity", "true", AttrPodName, "p", AttrPodNamespace, "ns"), "", string(perm))
	if err != nil || m.mode != AuthPodIdentity {
		t.Errorf("pod identity: %+v %v", m, err)
	}
	tokens, _ := json.Marshal(map[string]map[string]string{TokenExchangeAudience: {"token": "jwt"}, "other": {"token": "x"}})
	m, err = parseMount(attrs("tenantId", "t", "clientID", "app", AttrSATokens, string(tokens)), "", string(perm))
	if err != nil || m.mode != AuthWorkloadIdentity || m.saToken != "jwt" {
		t.Errorf("workload identity: %+v %v", m, err)
	}

	for name, tc := range map[string]struct{ attrib, secrets, perm, want string }{
		"attributes not JSON":  {"{", "", string(perm), "attributes"},
		"permission not mode":  {attrs("tenantId", "t"), sp, `"rw"`, "permission"},
		"vault name":           {attrs("tenantId", "t", "keyvaultName", "kv_app"), sp, string(perm), "keyvaultName"},
		"pod identity no pod":  {attrs("tenantId", "t", "usePodIdentity", "true"), "", string(perm), "pod's name"},
		"uami without vm":      {attrs("tenantId", "t", "userAssignedIdentityID", "x"), sp, string(perm), "userAssignedIdentityID"},
		"client id and vm":     {attrs("tenantId", "t", "clientID", "x", "useVMManagedIdentity", "true"), "", string(perm), "cannot be combined"},
		"token wrong audience": {attrs("tenantId", "t", "clientID", "x", AttrSATokens, `{"other":{"token":"x"}}`), "", string(perm), TokenExchangeAudience},
		"secret only id":       {attrs("tenantId", "t"), `{"clientid":"c"}`, string(perm), "nodePublishSecretRef"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseMount(tc.attrib, tc.secrets, tc.perm)
			if err == nil || !errors.Is(err, ErrInvalidParameters) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidParameters with %q", err, tc.want)
			}
		})
	}
}

// FuzzParseMount: whatever the driver sends, parseMount returns a mount with one auth mode and
// valid objects, or ErrInvalidParameters / ErrInvalidObjects; it never panics.
func FuzzParseMount(f *testing.F) {
	f.Add(attrs("tenantId", "t"), `{"clientid":"c","clientsecret":"s"}`, "420")
	f.Add(attrs("tenantId", "t", "clientID", "x", AttrSATokens, `{"api://AzureADTokenExchange":{"token":"j"}}`), "", "420")
	f.Add(attrs("tenantID", "t", "usePodIdentity", "1", AttrPodName, "p", AttrPodNamespace, "n"), "null", "384")
	f.Fuzz(func(t *testing.T, attributes, secrets, permission string) {
		m, err := parseMount(attributes, secrets, permission)
		if err != nil {
			if !errors.Is(err, ErrInvalidParameters) && !errors.Is(err, ErrInvalidObjects) {
				t.Fatalf("error %v is neither ErrInvalidParameters nor ErrInvalidObjects", err)
			}
			return
		}
		switch m.mode {
		case AuthWorkloadIdentity, AuthVMManagedIdentity, AuthPodIdentity, AuthServicePrincipal:
		default:
			t.Fatalf("mode %q", m.mode)
		}
		if m.vaultName == "" || m.tenantID == "" || len(m.objects) == 0 || m.permission > 0o777 {
			t.Fatalf("accepted %+v", m)
		}
	})
}
