package csiprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// cloudEnv is what a cloudName means to the provider: where Entra ID is, the Key Vault scope,
// and how a vault name becomes a vault URI.
type cloudEnv struct {
	authority     string
	keyVaultScope string
	vaultSuffix   string // NAME.SUFFIX; empty: ask lookupURL
	lookupURL     string // the local cloud's vault lookup: GET lookupURL + NAME
}

// Azure's clouds by the names the upstream provider accepts (cloudName), case-insensitive.
var knownClouds = map[string]cloudEnv{
	"azurepubliccloud":       {authority: "https://login.microsoftonline.com/", keyVaultScope: "https://vault.azure.net/.default", vaultSuffix: "vault.azure.net"},
	"azureusgovernmentcloud": {authority: "https://login.microsoftonline.us/", keyVaultScope: "https://vault.usgovcloudapi.net/.default", vaultSuffix: "vault.usgovcloudapi.net"},
	"azurechinacloud":        {authority: "https://login.chinacloudapi.cn/", keyVaultScope: "https://vault.azure.cn/.default", vaultSuffix: "vault.azure.cn"},
}

// cloudFor resolves a mount's cloudName: empty means the provider's own cloud (Options.Azure and
// Options.VaultLookupURL), as does that cloud's name.
func (p *Provider) cloudFor(name string) (cloudEnv, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" || n == strings.ToLower(p.o.CloudName) {
		return p.home, nil
	}
	if c, ok := knownClouds[n]; ok {
		return c, nil
	}
	return cloudEnv{}, fmt.Errorf("%w: cloudName %q is not AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud or %s", ErrInvalidParameters, name, p.o.CloudName)
}

// vaultURI finds a vault's address: NAME.SUFFIX in Azure, the lookup route in the local cloud.
func (p *Provider) vaultURI(ctx context.Context, c cloudEnv, name string) (string, error) {
	if c.vaultSuffix != "" {
		return "https://" + name + "." + c.vaultSuffix + "/", nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.lookupURL+url.PathEscape(name), nil)
	if err != nil {
		return "", fmt.Errorf("look up vault %q: %w", name, err)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("look up vault %q: %w", name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusNotFound {
		return "", fmt.Errorf("%w: no vault named %q", ErrVaultNotFound, name)
	}
	var out struct {
		VaultURI string `json:"vaultUri"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.VaultURI == "" {
		return "", fmt.Errorf("look up vault %q: HTTP %d", name, resp.StatusCode)
	}
	return out.VaultURI, nil
}
