package azurenames

import "testing"

func TestAllowedNames(t *testing.T) {
	for host, want := range map[string]bool{
		"login.microsoftonline.com": true, "login.windows.net": true, "login.microsoft.com": true, "sts.windows.net": true,
		"management.azure.com": true, "management.core.windows.net": true,
		"kv1.vault.azure.net": true, "my-vault-01.vault.azure.net": true,
		"vault.azure.net": false, ".vault.azure.net": false, "a.vault.azure.net": false, "1kv.vault.azure.net": false,
		"kv--1.vault.azure.net": false, "kv-.vault.azure.net": false, "x.kv1.vault.azure.net": false,
		"abcdefghijklmnopqrstuvwxy.vault.azure.net": false, // 25 characters
		"example.com": false, "localhost": false, "127.0.0.1": false, "management.azure.com.evil.example": false,
		"evil-login.microsoftonline.com": false, "graph.microsoft.com": false,
	} {
		if got := Allowed(host); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestHost(t *testing.T) {
	for in, want := range map[string]string{
		"Login.MicrosoftOnline.com":     "login.microsoftonline.com",
		"management.azure.com:443":      "management.azure.com",
		"management.azure.com.":         "management.azure.com",
		"127.0.0.1:8443":                "127.0.0.1",
		"[::1]:8443":                    "::1",
		"KV1.vault.azure.net:443":       "kv1.vault.azure.net",
		"login.microsoftonline.com:444": "login.microsoftonline.com",
	} {
		if got := Host(in); got != want {
			t.Errorf("Host(%q) = %q, want %q", in, got, want)
		}
	}
	if name, ok := VaultName(Host("KV1.Vault.Azure.Net")); !ok || name != "kv1" {
		t.Errorf("VaultName = %q %v", name, ok)
	}
	if got := VaultURI("KV1"); got != "https://kv1.vault.azure.net/" {
		t.Errorf("VaultURI = %s", got)
	}
}
