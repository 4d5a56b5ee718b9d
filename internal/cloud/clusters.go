package cloud

import (
	"context"

	"github.com/cerulean/cerulean/internal/cloud/arm/containerservice"
)

// BindCluster puts a local control plane behind an existing managed cluster: the cluster's
// oidcIssuerProfile.issuerURL becomes issuer. The cloud must trust the issuer's TLS (Options.TrustCAs)
// to verify the tokens it signs.
func (c *Cloud) BindCluster(ctx context.Context, clusterID, issuer string) error {
	return containerservice.Bind(ctx, c.arm, clusterID, issuer)
}
