package rollout

import "testing"

func TestVaultScope(t *testing.T) {
	for uri, want := range map[string]string{
		"https://kv1.vault.azure.net/":         "https://vault.azure.net/.default",
		"https://kv1.vault.azure.cn":           "https://vault.azure.cn/.default",
		"https://kv1.vault.usgovcloudapi.net/": "https://vault.usgovcloudapi.net/.default",
		"https://127.0.0.1:34567/":             "https://vault.azure.net/.default",
		"not a url\x00":                        "https://vault.azure.net/.default",
	} {
		if got := vaultScope(uri); got != want {
			t.Errorf("vaultScope(%q) = %q, want %q", uri, got, want)
		}
	}
}
