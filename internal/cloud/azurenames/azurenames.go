// Package azurenames holds the public Azure host names the local cloud answers under (through
// its forward proxy) and decides, from a request's host, which set of names an answer uses: a
// client that reached the cloud as login.microsoftonline.com, management.azure.com or
// NAME.vault.azure.net gets Azure's public names back; any other client (the loopback address)
// gets the cloud's own origin.
package azurenames

import (
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// Public host names.
const (
	LoginHost      = "login.microsoftonline.com" // the public authority host
	V1IssuerHost   = "sts.windows.net"           // the host of v1 token issuers
	ManagementHost = "management.azure.com"      // ARM's public endpoint
	VaultSuffix    = ".vault.azure.net"          // every vault's DNS suffix
)

// entraHosts are the names Entra ID answers under: the authority, its aliases that MSAL's
// instance-discovery metadata lists, and the v1 issuer's host.
var entraHosts = []string{LoginHost, "login.windows.net", "login.microsoft.com", V1IssuerHost}

// managementHosts are ARM's names: the endpoint and the legacy (audience) host.
var managementHosts = []string{ManagementHost, "management.core.windows.net"}

// EntraHosts returns the host names served by Entra ID, the preferred one first.
func EntraHosts() []string { return append([]string(nil), entraHosts...) }

// ManagementHosts returns the host names served by ARM, the endpoint first.
func ManagementHosts() []string { return append([]string(nil), managementHosts...) }

// Host is a request host in canonical form: lower case, without a port.
func Host(hostport string) string {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// IsEntra reports whether host (canonical) is one of Entra ID's public names.
func IsEntra(host string) bool { return slices.Contains(entraHosts, host) }

// IsManagement reports whether host (canonical) is one of ARM's public names.
func IsManagement(host string) bool { return slices.Contains(managementHosts, host) }

// vaultName is Key Vault's name rule: 3-24 letters, digits and hyphens, starting with a letter,
// ending with a letter or digit, no consecutive hyphens.
var vaultName = regexp.MustCompile(`^[a-z][a-z0-9-]{1,22}[a-z0-9]$`)

// VaultName returns NAME for a host NAME.vault.azure.net (canonical) whose NAME is a valid vault name.
func VaultName(host string) (string, bool) {
	name, ok := strings.CutSuffix(host, VaultSuffix)
	if !ok || !vaultName.MatchString(name) || strings.Contains(name, "--") {
		return "", false
	}
	return name, true
}

// VaultURI is a vault's public vaultUri.
func VaultURI(name string) string { return "https://" + strings.ToLower(name) + VaultSuffix + "/" }

// StorageSuffixes are the public DNS suffixes of the storage data planes the cloud serves.
var StorageSuffixes = []string{".blob.core.windows.net", ".queue.core.windows.net", ".table.core.windows.net"}

var storageAccountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)

// IsStorage reports whether host (canonical) is NAME.{blob,queue,table}.core.windows.net with a
// valid storage account NAME.
func IsStorage(host string) bool {
	for _, s := range StorageSuffixes {
		if name, ok := strings.CutSuffix(host, s); ok && storageAccountName.MatchString(name) {
			return true
		}
	}
	return false
}

// Allowed reports whether the cloud answers under host (canonical) at all.
func Allowed(host string) bool {
	_, vault := VaultName(host)
	return vault || IsEntra(host) || IsManagement(host) || IsStorage(host)
}

// Authority is the public authority URL of a tenant, as the Key Vault challenge names it.
func Authority(tenantID string) string { return "https://" + LoginHost + "/" + tenantID }

// AuthorityHost is Azure's public authority host as clients configure it (azcore's
// ActiveDirectoryAuthorityHost, a credentials file's authentication_endpoint).
const AuthorityHost = "https://" + LoginHost + "/"

// Issuer is the iss of v2 tokens Entra ID issues under its public name.
func Issuer(tenantID string) string { return "https://" + LoginHost + "/" + tenantID + "/v2.0" }

// V1Issuer is the iss of v1 tokens of a tenant.
func V1Issuer(tenantID string) string { return "https://" + V1IssuerHost + "/" + tenantID + "/" }

// RequestHost is the canonical host a request was addressed to.
func RequestHost(r *http.Request) string { return Host(r.Host) }
