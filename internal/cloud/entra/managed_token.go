package entra

import (
	"context"
	"fmt"
	"time"
)

// IssueManagedIdentityToken signs an access token for a managed identity with resource as its
// audience, as the managed-identity endpoints (IMDS, App Service) do for the compute the identity
// is assigned to. The caller has established that the identity may be used; this only refuses
// principals that are not managed identities.
func (s *Service) IssueManagedIdentityToken(ctx context.Context, p Principal, resource string) (string, time.Time, error) {
	if p.Kind != KindManagedIdentity {
		return "", time.Time{}, fmt.Errorf("issue managed identity token: principal kind %q: %w", p.Kind, ErrInvalid)
	}
	return s.sign(ctx, p, s.Issuer(p.TenantID), resource, "2")
}

// TokenLifetime is how long the access tokens the service issues are valid.
func (s *Service) TokenLifetime() time.Duration { return s.lifetime }
