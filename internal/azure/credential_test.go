package azure_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/cerulean/cerulean/internal/azure"
)

// The factory's refusals say what is wrong without repeating the material it was given.
func TestNewCredentialRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		cc   azure.ClientCredential
		want error
	}{
		"no tenant":      {azure.ClientCredential{ClientID: "c", Secret: "s3cr3t"}, azure.ErrIncomplete},
		"nothing to use": {azure.ClientCredential{TenantID: "t", ClientID: "c"}, azure.ErrIncomplete},
		"not a certificate": {azure.ClientCredential{TenantID: "t", ClientID: "c",
			Certificate: []byte("s3cr3t-not-pem"), CertificatePassword: "s3cr3t-pw"}, azure.ErrBadCertificate},
	} {
		_, err := azure.NewCredential(tc.cc, azcore.ClientOptions{})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error carries the secret material: %v", name, err)
		}
	}
}

func TestIsPublicAuthority(t *testing.T) {
	for host, want := range map[string]bool{
		"": true, "https://login.microsoftonline.com/": true, "https://LOGIN.microsoftonline.com": true,
		"https://login.microsoftonline.com.evil.example/": false, "https://127.0.0.1:8443/": false,
	} {
		if got := azure.IsPublicAuthority(host); got != want {
			t.Errorf("IsPublicAuthority(%q) = %v, want %v", host, got, want)
		}
	}
}
