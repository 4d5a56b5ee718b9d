package arm

import (
	"net/http"
	"slices"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

// MetadataOptions describe the cloud in ARM's cloud-metadata document.
type MetadataOptions struct {
	Name string // the cloud's name, e.g. "Cerulean"
	// LoginEndpoint is the Entra ID authority host (https://HOST:PORT/), for the SDKs that read
	// the current document (2020-06-01 and later).
	LoginEndpoint string
	// ADFSLoginEndpoint is the ADFS-style authority (https://HOST:PORT/adfs), for the Azure CLI,
	// which reads the older versions: MSAL Python 1.21 skips instance discovery (a call to
	// login.microsoftonline.com) only for ADFS authorities.
	ADFSLoginEndpoint string
}

// Metadata api-versions: 2015-01-01 is what the Azure CLI (msrestazure) asks when a cloud is
// registered with only --endpoint-resource-manager; 2019-05-01 is the list of clouds its
// ARM_CLOUD_METADATA_URL expects; 2020-06-01 and 2022-09-01 describe the one cloud (what
// current SDKs and Terraform's go-azure-sdk read).
const (
	metadataLegacy  = "2015-01-01"
	metadataList    = "2019-05-01"
	metadataCurrent = "2022-09-01"
)

// MetadataVersions are the api-versions GET /metadata/endpoints accepts.
var MetadataVersions = []string{metadataLegacy, metadataList, "2020-06-01", metadataCurrent}

// Metadata serves GET /metadata/endpoints, ARM's cloud-metadata document. Like Azure's, it needs
// no token: clients read it before they can get one.
func (s *Service) Metadata(o MetadataOptions) http.Handler {
	return httpx.Adapt(s.log, func(r *http.Request) (httpx.Response, error) {
		v := r.URL.Query().Get("api-version")
		switch {
		case v == "":
			return httpx.Response{}, errMissingAPIVersion()
		case !slices.Contains(MetadataVersions, v):
			return httpx.Response{}, Errorf(http.StatusBadRequest, "InvalidApiVersionParameter",
				"The api-version '%s' is invalid. The supported versions are '%s'.", clip(v, 32), strings.Join(MetadataVersions, ","))
		case v == metadataLegacy:
			return httpx.Response{Body: s.legacyMetadata(o)}, nil
		case v == metadataList:
			return httpx.Response{Body: []cloudMetadata{s.cloudMetadata(o, true)}}, nil
		default:
			return httpx.Response{Body: s.cloudMetadata(o, false)}, nil
		}
	}, writeError(s.log))
}

// legacyMetadata is the 2015-01-01 shape, from which msrestazure takes the login endpoint, the
// ARM audience and the Graph audience (graphEndpoint: the CLI uses it only as an audience).
func (s *Service) legacyMetadata(o MetadataOptions) map[string]any {
	return map[string]any{
		"galleryEndpoint": s.base() + "/",
		"graphEndpoint":   graphAudience,
		"portalEndpoint":  s.base() + "/",
		"authentication": map[string]any{
			"loginEndpoint": o.ADFSLoginEndpoint,
			"audiences":     metadataAudiences(),
		},
	}
}

type cloudMetadata struct {
	Name                     string            `json:"name"`
	Portal                   string            `json:"portal"`
	Authentication           metadataAuth      `json:"authentication"`
	ResourceManager          string            `json:"resourceManager"`
	Graph                    string            `json:"graph"`
	GraphAudience            string            `json:"graphAudience"`
	MicrosoftGraphResourceID string            `json:"microsoftGraphResourceId"`
	Suffixes                 map[string]string `json:"suffixes"`
}

type metadataAuth struct {
	LoginEndpoint    string   `json:"loginEndpoint"`
	Audiences        []string `json:"audiences"`
	Tenant           string   `json:"tenant"`
	IdentityProvider string   `json:"identityProvider"`
}

// cloudMetadata is the 2019-05-01 / 2022-09-01 shape. Graph endpoints point at the cloud itself,
// so that a client's Graph calls stay on this machine (and get Entra's 404) rather than going to
// Microsoft. keyVaultDns is Azure's: vaults here have their own origins, addressed by URI.
func (s *Service) cloudMetadata(o MetadataOptions, cli bool) cloudMetadata {
	auth := metadataAuth{LoginEndpoint: o.LoginEndpoint, Audiences: metadataAudiences(), Tenant: "common", IdentityProvider: "AAD"}
	if cli {
		auth = metadataAuth{LoginEndpoint: o.ADFSLoginEndpoint, Audiences: metadataAudiences(), Tenant: "adfs", IdentityProvider: "ADFS"}
	}
	return cloudMetadata{
		Name: o.Name, Portal: s.base(), Authentication: auth, ResourceManager: s.base() + "/",
		Graph: s.base() + "/", GraphAudience: graphAudience, MicrosoftGraphResourceID: s.base() + "/",
		Suffixes: map[string]string{"keyVaultDns": "vault.azure.net", "storage": "core.windows.net"},
	}
}

// graphAudience is Azure AD Graph's audience, which the CLI requires a cloud to name.
const graphAudience = "https://graph.windows.net/"

// metadataAudiences are ARM's audiences, the one clients ask tokens for first.
func metadataAudiences() []string {
	out := make([]string, len(Audiences))
	for i, a := range Audiences {
		out[i] = a + "/"
	}
	return out
}

func (s *Service) base() string { return strings.TrimSuffix(s.o.BaseURL, "/") }
