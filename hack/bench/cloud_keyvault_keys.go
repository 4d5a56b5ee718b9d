package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/authz"
)

func init() {
	register(section{title: "Local cloud: Key Vault keys", run: benchCloudKeyVaultKeys})
}

// benchCloudKeyVaultKeys measures RSA 2048 sign (RS256) and unwrapKey (RSA-OAEP-256) through
// azkeys against the same operation done in-process with Go's crypto, the floor any vault adds
// its token check, RBAC check, store read and HTTPS round trip to.
func benchCloudKeyVaultKeys(ctx context.Context, env benchEnv) ([]row, error) {
	limits := cloudarm.Unlimited
	c, err := startCloud(ctx, env, "cloud-keyvault-keys", cloud.Options{ARM: cloudarm.Config{RetryAfter: 50 * time.Millisecond, Limits: &limits}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	opts := c.ClientOptions()
	hc, tr := loadClient(c)
	defer tr.CloseIdleConnections()
	opts.Transport = hc
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	cred, err := ownerCred(c, opts)
	if err != nil {
		return nil, err
	}
	uri, vaultID, err := benchVault(ctx, s, cred, opts)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	name := uuid.NewString()
	if err := c.ARM().Authz().Ensure(ctx, authz.Assignment{ID: authz.AssignmentID(vaultID, name), Name: name, Scope: vaultID,
		RoleDefinitionID: authz.KeyVaultCryptoOfficer, PrincipalID: s.ObjectID, PrincipalType: "ServicePrincipal", CreatedOn: now, UpdatedOn: now}); err != nil {
		return nil, err
	}
	kc, err := azkeys.NewClient(uri, cred, &azkeys.ClientOptions{ClientOptions: opts, DisableChallengeResourceVerification: true})
	if err != nil {
		return nil, err
	}
	if _, err := kc.CreateKey(ctx, "bench", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA), KeySize: to.Ptr[int32](2048)}, nil); err != nil {
		return nil, fmt.Errorf("create key: %w", err)
	}
	digest := sha256.Sum256([]byte("bench"))
	cek := make([]byte, 32)
	wrapped, err := kc.WrapKey(ctx, "bench", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP256), Value: cek}, nil)
	if err != nil {
		return nil, fmt.Errorf("wrap: %w", err)
	}
	sign := func(ctx context.Context) error {
		_, err := kc.Sign(ctx, "bench", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmRS256), Value: digest[:]}, nil)
		return err
	}
	unwrap := func(ctx context.Context) error {
		_, err := kc.UnwrapKey(ctx, "bench", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP256), Value: wrapped.Result}, nil)
		return err
	}
	// The in-process baseline: the same operations with a key of the same size.
	local, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	localWrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, &local.PublicKey, cek, nil)
	if err != nil {
		return nil, err
	}
	localSign := func(context.Context) error {
		_, err := local.Sign(rand.Reader, digest[:], crypto.SHA256)
		return err
	}
	localUnwrap := func(context.Context) error {
		_, err := rsa.DecryptOAEP(sha256.New(), rand.Reader, local, localWrapped, nil)
		return err
	}
	var rows []row
	for _, conc := range []int{1, 8} {
		for _, op := range []struct {
			name          string
			remote, local func(context.Context) error
		}{{"sign RS256", sign, localSign}, {"unwrapKey RSA-OAEP-256", unwrap, localUnwrap}} {
			base := benchutil.Load(ctx, conc, 2000*conc, 10*time.Second, op.local)
			r := benchutil.Load(ctx, conc, min(300*conc, 2000), 20*time.Second, op.remote)
			rows = append(rows, row{
				benchmark:  fmt.Sprintf("key %s (RSA 2048), %d concurrent", op.name, conc),
				result:     r.String(),
				vsBaseline: ratio(r.RPS(), base.RPS()) + fmt.Sprintf(" of in-process Go crypto (%.0f ops/s)", base.RPS()),
			})
		}
	}
	return rows, nil
}
