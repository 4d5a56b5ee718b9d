package cloud

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/pki"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

const (
	bucketCloud  = "cloud"
	keyBootstrap = "bootstrap"
)

// bootstrap is what the first start creates and every later start reuses. The secret and the
// client key are kept in clear here because `cloud env` must print them after any restart; the
// data directory is private to the user (0700), like ~/.azure.
type bootstrap struct {
	TenantID       string `json:"tenantId"`
	SubscriptionID string `json:"subscriptionId"`
	ClientID       string `json:"clientId"`
	ObjectID       string `json:"objectId"`
	ClientSecret   string `json:"clientSecret"`
	ClientCertPEM  []byte `json:"clientCertPem"`
}

// ensureBootstrap loads the bootstrap record or creates the tenant, subscription id and Owner
// service principal. The record is written last: a crash before it leaves only unreferenced
// objects, and the next start bootstraps again.
func ensureBootstrap(ctx context.Context, st *store.Store, dir *entra.Directory, now func() time.Time) (bootstrap, error) {
	var b bootstrap
	err := st.View(ctx, func(tx *store.Tx) error { return tx.Get(bucketCloud, keyBootstrap, &b) })
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return b, fmt.Errorf("load bootstrap: %w", err)
	}
	t, err := dir.CreateTenant(ctx, "Cerulean")
	if err != nil {
		return b, err
	}
	p, err := dir.CreatePrincipal(ctx, entra.Principal{TenantID: t.ID, Kind: entra.KindServicePrincipal, DisplayName: "cerulean-bootstrap"})
	if err != nil {
		return b, err
	}
	secret, _, err := dir.AddSecret(ctx, t.ID, p.ClientID, now().AddDate(10, 0, 0))
	if err != nil {
		return b, err
	}
	cert, certPEM, err := pki.SelfSigned("cerulean-bootstrap", now())
	if err != nil {
		return b, fmt.Errorf("create bootstrap certificate: %w", err)
	}
	if _, err := dir.AddCertificate(ctx, t.ID, p.ClientID, cert); err != nil {
		return b, err
	}
	b = bootstrap{
		TenantID: t.ID, SubscriptionID: uuid.NewString(), ClientID: p.ClientID, ObjectID: p.ObjectID,
		ClientSecret: secret, ClientCertPEM: certPEM,
	}
	if err := st.Update(ctx, func(tx *store.Tx) error { return tx.Put(bucketCloud, keyBootstrap, b) }); err != nil {
		return b, fmt.Errorf("store bootstrap: %w", err)
	}
	return b, nil
}
