package cloud

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/pki"
	"github.com/cerulean/cerulean/internal/cloud/store"
	"github.com/cerulean/cerulean/internal/fsutil"
)

const (
	bucketCloud  = "cloud"
	keyBootstrap = "bootstrap"
)

// The bootstrap principal's credentials live in files of their own in the data directory (0600,
// the directory 0700, like ~/.azure), because `cloud env` must print them after any restart; the
// state keeps only the secret's hash and the certificate's public part, in the principal.
const (
	clientSecretFile = "bootstrap-secret"     // the client secret, one line
	clientCertFile   = "bootstrap-client.pem" // the client certificate, then its key
)

// bootstrapRecord is what the state keeps of the bootstrap: names, never credentials. Earlier
// versions kept the client secret and the certificate with its key in the record too (the
// Legacy fields): ensureBootstrap moves them to their files and rewrites the state without them.
type bootstrapRecord struct {
	TenantID       string `json:"tenantId"`
	SubscriptionID string `json:"subscriptionId"`
	ClientID       string `json:"clientId"`
	ObjectID       string `json:"objectId"`
	LegacySecret   string `json:"clientSecret,omitempty"`
	LegacyCertPEM  []byte `json:"clientCertPem,omitempty"`
}

// bootstrap is what the first start creates and every later start reuses: the record, and the
// credentials read from their files.
type bootstrap struct {
	bootstrapRecord
	ClientSecret   string
	ClientCertPath string
}

// ensureBootstrap loads the bootstrap or creates the tenant, subscription id and Owner service
// principal. The record is written last: a crash before it leaves only unreferenced objects (and
// credential files the next start overwrites), and the next start bootstraps again.
func ensureBootstrap(ctx context.Context, st *store.Store, dir *entra.Directory, dataDir string, now func() time.Time, log *slog.Logger) (bootstrap, error) {
	var rec bootstrapRecord
	err := st.View(ctx, func(tx *store.Tx) error { return tx.Get(bucketCloud, keyBootstrap, &rec) })
	if errors.Is(err, store.ErrNotFound) {
		return createBootstrap(ctx, st, dir, dataDir, now)
	}
	if err != nil {
		return bootstrap{}, fmt.Errorf("load bootstrap: %w", err)
	}
	if rec.LegacySecret != "" || rec.LegacyCertPEM != nil {
		if rec, err = migrateBootstrap(ctx, st, dataDir, rec); err != nil {
			return bootstrap{}, err
		}
		log.InfoContext(ctx, "Moved the bootstrap principal's credentials out of the state", "dataDir", dataDir)
	}
	b := bootstrap{bootstrapRecord: rec, ClientCertPath: filepath.Join(dataDir, clientCertFile)}
	if b.ClientSecret, err = bootstrapSecret(ctx, dir, dataDir, rec, now, log); err != nil {
		return bootstrap{}, err
	}
	if err := bootstrapCertificate(ctx, dir, dataDir, rec, now, log); err != nil {
		return bootstrap{}, err
	}
	return b, nil
}

func createBootstrap(ctx context.Context, st *store.Store, dir *entra.Directory, dataDir string, now func() time.Time) (bootstrap, error) {
	t, err := dir.CreateTenant(ctx, "Cerulean")
	if err != nil {
		return bootstrap{}, err
	}
	p, err := dir.CreatePrincipal(ctx, entra.Principal{TenantID: t.ID, Kind: entra.KindServicePrincipal, DisplayName: "cerulean-bootstrap"})
	if err != nil {
		return bootstrap{}, err
	}
	rec := bootstrapRecord{TenantID: t.ID, SubscriptionID: uuid.NewString(), ClientID: p.ClientID, ObjectID: p.ObjectID}
	secret, err := newBootstrapSecret(ctx, dir, dataDir, rec, now)
	if err != nil {
		return bootstrap{}, err
	}
	if err := newBootstrapCertificate(ctx, dir, dataDir, rec, now); err != nil {
		return bootstrap{}, err
	}
	if err := st.Update(ctx, func(tx *store.Tx) error { return tx.Put(bucketCloud, keyBootstrap, rec) }); err != nil {
		return bootstrap{}, fmt.Errorf("store bootstrap: %w", err)
	}
	return bootstrap{bootstrapRecord: rec, ClientSecret: secret, ClientCertPath: filepath.Join(dataDir, clientCertFile)}, nil
}

// migrateBootstrap moves the credentials a record of an earlier version holds to their files,
// then rewrites the state without them (store.Rewrite, so no free page keeps them either). The
// files come first: a crash in between leaves the old record, and the next start migrates again.
func migrateBootstrap(ctx context.Context, st *store.Store, dataDir string, rec bootstrapRecord) (bootstrapRecord, error) {
	if rec.LegacySecret != "" {
		if err := fsutil.WriteFileAtomic(filepath.Join(dataDir, clientSecretFile), []byte(rec.LegacySecret+"\n"), 0o600); err != nil {
			return rec, fmt.Errorf("move bootstrap secret to its file: %w", err)
		}
	}
	if rec.LegacyCertPEM != nil {
		if err := fsutil.WriteFileAtomic(filepath.Join(dataDir, clientCertFile), rec.LegacyCertPEM, 0o600); err != nil {
			return rec, fmt.Errorf("move bootstrap certificate to its file: %w", err)
		}
	}
	rec.LegacySecret, rec.LegacyCertPEM = "", nil
	if err := st.Rewrite(ctx, func(tx *store.Tx) error { return tx.Put(bucketCloud, keyBootstrap, rec) }); err != nil {
		return rec, fmt.Errorf("remove bootstrap credentials from the state: %w", err)
	}
	return rec, nil
}

// bootstrapSecret reads the secret's file. Without it (deleted by hand) the value is lost, since
// the state has only its hash: the principal gets a new secret, written to a new file.
func bootstrapSecret(ctx context.Context, dir *entra.Directory, dataDir string, rec bootstrapRecord, now func() time.Time, log *slog.Logger) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, clientSecretFile))
	if err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read bootstrap secret: %w", err)
	}
	log.WarnContext(ctx, "The bootstrap secret's file is missing: issuing a new secret", "file", filepath.Join(dataDir, clientSecretFile))
	return newBootstrapSecret(ctx, dir, dataDir, rec, now)
}

func newBootstrapSecret(ctx context.Context, dir *entra.Directory, dataDir string, rec bootstrapRecord, now func() time.Time) (string, error) {
	secret, _, err := dir.AddSecret(ctx, rec.TenantID, rec.ClientID, now().AddDate(10, 0, 0))
	if err != nil {
		return "", err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dataDir, clientSecretFile), []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write bootstrap secret: %w", err)
	}
	return secret, nil
}

// bootstrapCertificate checks the certificate's file, and gives the principal a new certificate
// when it is missing (its key was never in the state).
func bootstrapCertificate(ctx context.Context, dir *entra.Directory, dataDir string, rec bootstrapRecord, now func() time.Time, log *slog.Logger) error {
	_, err := os.Stat(filepath.Join(dataDir, clientCertFile))
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read bootstrap certificate: %w", err)
	}
	log.WarnContext(ctx, "The bootstrap certificate's file is missing: issuing a new certificate", "file", filepath.Join(dataDir, clientCertFile))
	return newBootstrapCertificate(ctx, dir, dataDir, rec, now)
}

func newBootstrapCertificate(ctx context.Context, dir *entra.Directory, dataDir string, rec bootstrapRecord, now func() time.Time) error {
	cert, certPEM, err := pki.SelfSigned("cerulean-bootstrap", now())
	if err != nil {
		return fmt.Errorf("create bootstrap certificate: %w", err)
	}
	if _, err := dir.AddCertificate(ctx, rec.TenantID, rec.ClientID, cert); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dataDir, clientCertFile), certPEM, 0o600); err != nil {
		return fmt.Errorf("write bootstrap client certificate: %w", err)
	}
	return nil
}
