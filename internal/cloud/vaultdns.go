package cloud

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"

	"github.com/cerulean/cerulean/internal/cloud/keyvault"
)

// VaultLookupPath is the route that stands in for Azure's public DNS names of vaults
// (NAME.vault.azure.net): GET VaultLookupPath + NAME answers {"name","vaultUri"} for an active
// vault and 404 otherwise. Like DNS it needs no token: a vault's name and address are public in
// Azure too, and nothing else is told.
const VaultLookupPath = "/_cerulean/vaults/"

var vaultNamePattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]{1,22}[a-zA-Z0-9]$`)

// registerVaultLookup serves VaultLookupPath, through which a Key Vault client that knows only a
// vault's name (the Secrets Store CSI provider's keyvaultName) finds its address.
func (c *Cloud) registerVaultLookup(mux *http.ServeMux) {
	mux.HandleFunc("GET "+VaultLookupPath+"{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		w.Header().Set("Content-Type", "application/json")
		if !vaultNamePattern.MatchString(name) {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "VaultNameNotValid", "message": "The vault name is not valid."}})
			return
		}
		v, err := c.keyVault.data.Vault(r.Context(), name)
		if err != nil || v.IsDeleted() {
			status, code := http.StatusNotFound, "VaultNotFound"
			if err != nil && !errors.Is(err, keyvault.ErrVaultNotFound) {
				status, code = http.StatusInternalServerError, "InternalError"
			}
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": "No vault named " + name + "."}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"name": v.Name, "vaultUri": v.URI()})
	})
}
