package azure_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// envOf is what `cerulean-local cloud env` exports, as a getenv function.
func envOf(t *testing.T, c *cloud.Cloud) func(string) string {
	t.Helper()
	vars := map[string]string{}
	for _, line := range c.Env() {
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("env line %q", line)
		}
		vars[name] = strings.Trim(value, "'")
	}
	return func(name string) string { return vars[name] }
}

// From the local cloud's environment alone, both credential kinds reach ARM with the real SDK.
func TestConfigFromTheLocalCloudsEnvironment(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{})
	cfg := azure.ConfigFromEnv(envOf(t, c))
	if cfg.IsPublic() {
		t.Fatal("the local cloud's configuration is taken for the public cloud")
	}
	withCert := cfg
	withCert.ClientSecret = ""
	for name, cfg := range map[string]azure.Config{"secret": cfg, "certificate": withCert} {
		t.Run(name, func(t *testing.T) {
			cred, err := cfg.Credential()
			if err != nil {
				t.Fatalf("credential: %v", err)
			}
			opts, err := cfg.ARMOptions()
			if err != nil {
				t.Fatal(err)
			}
			groups, err := armresources.NewResourceGroupsClient(cfg.SubscriptionID, cred, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := groups.CreateOrUpdate(t.Context(), "rg-"+name, armresources.ResourceGroup{Location: new("local")}, nil); err != nil {
				t.Fatalf("create a resource group with the %s credential: %v", name, err)
			}
		})
	}

	so, err := cfg.SecretsOptions()
	if err != nil {
		t.Fatal(err)
	}
	if !so.DisableChallengeResourceVerification {
		t.Error("Key Vault challenge verification is on for a vault on 127.0.0.1")
	}
}

func TestPublicCloudKeepsTheSDKDefaults(t *testing.T) {
	for _, authority := range []string{"", "https://login.microsoftonline.com/"} {
		cfg := azure.Config{TenantID: "t", ClientID: "c", ClientSecret: "s", AuthorityHost: authority}
		if !cfg.IsPublic() {
			t.Errorf("authority %q is not taken for the public cloud", authority)
		}
		opts, err := cfg.ClientOptions()
		if err != nil {
			t.Fatal(err)
		}
		if opts.Cloud.ActiveDirectoryAuthorityHost != "" || opts.Transport != nil {
			t.Errorf("authority %q: client options changed from the SDK's defaults: %+v", authority, opts)
		}
		so, _ := cfg.SecretsOptions()
		if so.DisableChallengeResourceVerification {
			t.Errorf("authority %q: challenge verification turned off for the public cloud", authority)
		}
	}
}

func TestIncompleteOrBadConfigurationFailsClearly(t *testing.T) {
	for name, cfg := range map[string]azure.Config{
		"no tenant":     {ClientID: "c", ClientSecret: "s"},
		"no client id":  {TenantID: "t", ClientSecret: "s"},
		"no credential": {TenantID: "t", ClientID: "c"},
	} {
		if _, err := cfg.Credential(); !errors.Is(err, azure.ErrIncomplete) {
			t.Errorf("%s: %v, want ErrIncomplete", name, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	if _, err := (azure.Config{CAFile: missing}).ClientOptions(); err == nil || !strings.Contains(err.Error(), "CA bundle") {
		t.Errorf("a missing CA file: %v, want an error naming the CA bundle", err)
	}
	cfg := azure.Config{TenantID: "t", ClientID: "c", ClientCertificatePath: missing, AuthorityHost: "https://127.0.0.1:1/"}
	if _, err := cfg.Credential(); err == nil || !strings.Contains(err.Error(), "client certificate") {
		t.Errorf("a missing certificate: %v, want an error naming the client certificate", err)
	}
	// The secret never appears in an error.
	cfg = azure.Config{ClientID: "c", ClientSecret: "do-not-print-me"}
	if _, err := cfg.Credential(); err == nil || strings.Contains(err.Error(), "do-not-print-me") {
		t.Errorf("error %v", err)
	}
}
