// Package kmsplugin is a KMS v2 plugin for kube-apiserver backed by a Key Vault key: the API
// server's data encryption keys are wrapped with the key (wrapKey/unwrapKey, RSA-OAEP-256), so
// what it writes to etcd can be read back only while Key Vault lets the plugin's identity unwrap.
// The gRPC side is k8s.io/kms's; this package is the Key Vault side.
package kmsplugin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"k8s.io/kms/pkg/service"
)

// Algorithm wraps and unwraps the API server's keys.
const Algorithm = azkeys.EncryptionAlgorithmRSAOAEP256

// Options name the key and how to reach it.
type Options struct {
	// VaultURL is the vault's URI (https://NAME.vault.azure.net/).
	VaultURL string
	// KeyName is the RSA key that wraps.
	KeyName string
	// KeyVersion pins one version; empty follows the key's current version, so rotating the
	// key in Key Vault makes the API server wrap new data keys with the new version (older
	// ciphertexts name their version and stay readable).
	KeyVersion string
	Credential azcore.TokenCredential
	Client     *azkeys.ClientOptions
}

// Plugin is the k8s.io/kms Service over one Key Vault key.
type Plugin struct {
	o    Options
	keys *azkeys.Client
}

var _ service.Service = (*Plugin)(nil)

// New checks the options and makes the Key Vault client; it calls nothing.
func New(o Options) (*Plugin, error) {
	u, err := url.Parse(o.VaultURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("vault URL %q: want https://NAME.vault.azure.net/", o.VaultURL)
	}
	if o.KeyName == "" {
		return nil, errors.New("a key name is required")
	}
	if o.Credential == nil {
		return nil, errors.New("a credential is required")
	}
	keys, err := azkeys.NewClient(o.VaultURL, o.Credential, o.Client)
	if err != nil {
		return nil, err
	}
	return &Plugin{o: o, keys: keys}, nil
}

// Encrypt wraps a data encryption key; the key id names the version that wrapped it.
func (p *Plugin) Encrypt(ctx context.Context, _ string, data []byte) (*service.EncryptResponse, error) {
	res, err := p.keys.WrapKey(ctx, p.o.KeyName, p.o.KeyVersion, azkeys.KeyOperationParameters{Algorithm: to.Ptr(Algorithm), Value: data}, nil)
	if err != nil {
		return nil, fmt.Errorf("wrap with Key Vault key %s: %w", p.o.KeyName, err)
	}
	if res.KID == nil {
		return nil, fmt.Errorf("wrap with Key Vault key %s: the answer names no key version", p.o.KeyName)
	}
	return &service.EncryptResponse{Ciphertext: res.Result, KeyID: string(*res.KID)}, nil
}

// Decrypt unwraps with the version named by the key id the ciphertext was stored with.
func (p *Plugin) Decrypt(ctx context.Context, _ string, req *service.DecryptRequest) ([]byte, error) {
	kid := azkeys.ID(req.KeyID)
	if !strings.EqualFold(kid.Name(), p.o.KeyName) || kid.Version() == "" {
		return nil, fmt.Errorf("key id %q is not a version of Key Vault key %s", req.KeyID, p.o.KeyName)
	}
	res, err := p.keys.UnwrapKey(ctx, kid.Name(), kid.Version(), azkeys.KeyOperationParameters{Algorithm: to.Ptr(Algorithm), Value: req.Ciphertext}, nil)
	if err != nil {
		return nil, fmt.Errorf("unwrap with Key Vault key %s version %s: %w", p.o.KeyName, kid.Version(), err)
	}
	return res.Result, nil
}

// Status is healthy when the key can be read; its key id is the version new data keys get, so
// the API server notices a rotation at its next status check.
func (p *Plugin) Status(ctx context.Context) (*service.StatusResponse, error) {
	res, err := p.keys.GetKey(ctx, p.o.KeyName, p.o.KeyVersion, nil)
	if err != nil {
		return &service.StatusResponse{Version: "v2", Healthz: fmt.Sprintf("read Key Vault key %s: %v", p.o.KeyName, err), KeyID: p.o.KeyName}, nil
	}
	if res.Key == nil || res.Key.KID == nil {
		return &service.StatusResponse{Version: "v2", Healthz: "Key Vault answered without a key id", KeyID: p.o.KeyName}, nil
	}
	return &service.StatusResponse{Version: "v2", Healthz: "ok", KeyID: string(*res.Key.KID)}, nil
}

// Serve runs the plugin on a unix socket until ctx ends.
func Serve(ctx context.Context, p *Plugin, socket string) error {
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the old socket %s: %w", socket, err)
	}
	s := service.NewGRPCService(socket, 30*time.Second, p)
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe() }()
	select {
	case err := <-done:
		return fmt.Errorf("serve KMS plugin on %s: %w", socket, err)
	case <-ctx.Done():
		// Shutdown is a no-op until ListenAndServe has made its server: ask until it returns.
		for {
			s.Shutdown()
			select {
			case err := <-done:
				return err // nil after a shutdown
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// ProviderName is the plugin's name in kube-apiserver's EncryptionConfiguration: what it
// writes to etcd starts with k8s:enc:kms:v2:ProviderName:.
const ProviderName = "keyvault"

// EncryptionConfig is a kube-apiserver EncryptionConfiguration that encrypts Secrets with the
// plugin on socket. Its second provider, identity, reads Secrets written before encryption was
// on; every write goes to the plugin, so nothing new is stored in the clear.
func EncryptionConfig(socket string) []byte {
	return []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - kms:
      apiVersion: v2
      name: ` + ProviderName + `
      endpoint: unix://` + socket + `
      timeout: 10s
  - identity: {}
`)
}
