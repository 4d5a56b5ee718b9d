package cloud

import (
	"net/http"

	"github.com/cerulean/cerulean/internal/cloud/arm"
)

// CloudName is the cloud's name in ARM's cloud-metadata document, and the name the docs give it
// in the Azure CLI.
const CloudName = "Cerulean"

// registerMetadata serves ARM's cloud-metadata document, GET /metadata/endpoints, through which
// the Azure CLI and Terraform-style clients discover the cloud's endpoints.
func (c *Cloud) registerMetadata(mux *http.ServeMux) {
	mux.Handle("GET /metadata/endpoints", c.arm.Metadata(arm.MetadataOptions{
		Name: CloudName, LoginEndpoint: c.settings.AuthorityHost, ADFSLoginEndpoint: c.settings.URL + "/adfs",
	}))
}
