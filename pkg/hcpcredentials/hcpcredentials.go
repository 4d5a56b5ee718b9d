// Package hcpcredentials is the library a hosted control plane's component uses to authenticate
// as its managed identity with the credentials file the Secrets Store CSI provider mounts from
// Key Vault (HyperShift's "UserAssignedIdentityCredentials" JSON). It builds an
// azcore.TokenCredential from the certificate in the file, sending the chain, and follows the
// file as it rotates: it reloads when the file changes and on a slow timer, swaps only to a
// credential whose not_before is newer, and never serves an expired one.
package hcpcredentials

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/fsnotify/fsnotify"

	"github.com/cerulean/cerulean/internal/azure"
)

// EnvPath names the variable holding the credentials file's path.
const EnvPath = "MANAGED_AZURE_HCP_CREDENTIALS_FILE_PATH"

// Errors.
var (
	ErrInvalid = errors.New("invalid credentials file")
	ErrExpired = errors.New("credentials expired")
)

// File is the credentials JSON, one per identity, as HyperShift writes it into Key Vault.
type File struct {
	AuthenticationEndpoint     string          `json:"authentication_endpoint"`
	ClientID                   string          `json:"client_id"`
	ClientSecret               string          `json:"client_secret"` // base64 of a PEM bundle: certificate(s) and key
	TenantID                   string          `json:"tenant_id"`
	ObjectID                   string          `json:"object_id"`
	NotBefore                  time.Time       `json:"not_before"`
	NotAfter                   time.Time       `json:"not_after"`
	RenewAfter                 time.Time       `json:"renew_after"`
	CannotRenewAfter           time.Time       `json:"cannot_renew_after"`
	ClientSecretURL            string          `json:"client_secret_url,omitempty"`
	MTLSAuthenticationEndpoint string          `json:"mtls_authentication_endpoint,omitempty"`
	CustomClaims               json.RawMessage `json:"custom_claims,omitempty"`
}

// Parse reads and checks a credentials file's content. Errors never repeat the secret.
func Parse(b []byte) (File, []*x509.Certificate, crypto.PrivateKey, error) {
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return File{}, nil, nil, fmt.Errorf("%w: not JSON of the credentials shape", ErrInvalid)
	}
	for name, v := range map[string]string{"authentication_endpoint": f.AuthenticationEndpoint, "client_id": f.ClientID,
		"client_secret": f.ClientSecret, "tenant_id": f.TenantID} {
		if v == "" {
			return File{}, nil, nil, fmt.Errorf("%w: %s is missing", ErrInvalid, name)
		}
	}
	if f.NotBefore.IsZero() || f.NotAfter.IsZero() || !f.NotAfter.After(f.NotBefore) {
		return File{}, nil, nil, fmt.Errorf("%w: not_before and not_after must be RFC 3339 times, not_after later", ErrInvalid)
	}
	pemBytes, err := base64.StdEncoding.DecodeString(f.ClientSecret)
	if err != nil {
		return File{}, nil, nil, fmt.Errorf("%w: client_secret is not base64", ErrInvalid)
	}
	certs, key, err := azidentity.ParseCertificates(pemBytes, nil)
	if err != nil {
		return File{}, nil, nil, fmt.Errorf("%w: client_secret holds no certificate and key", ErrInvalid)
	}
	return f, certs, key, nil
}

// Options configure a Credential.
type Options struct {
	// Path is the credentials file; empty means $MANAGED_AZURE_HCP_CREDENTIALS_FILE_PATH.
	Path string
	// ClientOptions for the token requests (transport, retries); the authority host is always
	// the file's authentication_endpoint, as written (its Cloud setting is replaced).
	ClientOptions azcore.ClientOptions
	// ReloadInterval is the slow timer besides file events (default 5 minutes).
	ReloadInterval time.Duration
	Clock          func() time.Time
	Logger         *slog.Logger
}

// Credential is an azcore.TokenCredential that follows the credentials file.
type Credential struct {
	o Options

	mu   sync.RWMutex
	file File
	cred azcore.TokenCredential
}

// Info describes the credential in use; never the secret.
type Info struct {
	ClientID, TenantID, ObjectID string
	AuthorityHost                string // the file's authentication_endpoint
	NotBefore, NotAfter          time.Time
}

// New loads the file (an error if it is invalid or expired) and follows it until ctx ends.
func New(ctx context.Context, o Options) (*Credential, error) {
	if o.Path == "" {
		o.Path = os.Getenv(EnvPath)
	}
	if o.Path == "" {
		return nil, fmt.Errorf("%w: %s is not set", ErrInvalid, EnvPath)
	}
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = 5 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Credential{o: o}
	if _, err := c.Reload(); err != nil {
		return nil, err
	}
	if c.current().NotAfter.Before(o.Clock()) {
		return nil, fmt.Errorf("%w: %s expired at %s", ErrExpired, o.Path, c.file.NotAfter.Format(time.RFC3339))
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch credentials file: %w", err)
	}
	// The directory, not the file: the CSI driver swaps a symlinked directory, so the file's
	// inode changes and a watch on it would go quiet after the first rotation.
	if err := w.Add(filepath.Dir(o.Path)); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watch credentials file: %w", err)
	}
	go c.follow(ctx, w)
	return c, nil
}

func (c *Credential) follow(ctx context.Context, w *fsnotify.Watcher) {
	defer w.Close()
	t := time.NewTicker(c.o.ReloadInterval)
	defer t.Stop()
	reload := func(why string) {
		swapped, err := c.Reload()
		switch {
		case err != nil:
			c.o.Logger.Info("Kept the current credentials", "reason", why, "error", err.Error())
		case swapped:
			i := c.Current()
			c.o.Logger.Info("Loaded newer credentials", "reason", why, "clientId", i.ClientID, "notBefore", i.NotBefore)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			reload("timer")
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			reload("file changed")
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			c.o.Logger.Info("Watching the credentials file failed", "error", err.Error())
		}
	}
}

// Reload reads the file and swaps to it if its not_before is newer than the current one's. It
// reports whether it swapped; an invalid file is an error and changes nothing.
func (c *Credential) Reload() (bool, error) {
	b, err := os.ReadFile(c.o.Path)
	if err != nil {
		return false, fmt.Errorf("read credentials file: %w", err)
	}
	f, certs, key, err := Parse(b)
	if err != nil {
		return false, fmt.Errorf("%s: %w", c.o.Path, err)
	}
	c.mu.RLock()
	newer := c.cred == nil || f.NotBefore.After(c.file.NotBefore)
	c.mu.RUnlock()
	if !newer {
		return false, nil
	}
	authority := f.AuthenticationEndpoint
	opts := c.o.ClientOptions
	opts.Cloud = azcloud.Configuration{ActiveDirectoryAuthorityHost: authority, Services: opts.Cloud.Services}
	cred, err := azure.NewCredential(azure.ClientCredential{
		TenantID: f.TenantID, ClientID: f.ClientID, Certificates: certs, Key: key, SendCertificateChain: true,
	}, opts)
	if err != nil {
		return false, fmt.Errorf("%s: build credential: %w", c.o.Path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cred != nil && !f.NotBefore.After(c.file.NotBefore) { // a concurrent reload won
		return false, nil
	}
	c.file, c.cred = f, cred
	return true, nil
}

func (c *Credential) current() File {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.file
}

// Current describes the credential in use.
func (c *Credential) Current() Info {
	f := c.current()
	return Info{ClientID: f.ClientID, TenantID: f.TenantID, ObjectID: f.ObjectID, AuthorityHost: f.AuthenticationEndpoint,
		NotBefore: f.NotBefore, NotAfter: f.NotAfter}
}

// GetToken implements azcore.TokenCredential with the newest credential, or fails if it has
// expired (checked again after a reload, in case the file was rotated since the last event).
func (c *Credential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.mu.RLock()
	f, cred := c.file, c.cred
	c.mu.RUnlock()
	if !c.o.Clock().Before(f.NotAfter) {
		if _, err := c.Reload(); err == nil {
			c.mu.RLock()
			f, cred = c.file, c.cred
			c.mu.RUnlock()
		}
		if !c.o.Clock().Before(f.NotAfter) {
			return azcore.AccessToken{}, fmt.Errorf("%w: the credentials of client %s expired at %s and no newer file is mounted", ErrExpired, f.ClientID, f.NotAfter.Format(time.RFC3339))
		}
	}
	return cred.GetToken(ctx, opts)
}
