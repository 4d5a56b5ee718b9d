package exports

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"

	"k8s.io/utils/ptr"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/cerulean/cerulean/internal/azure"
)

// ContentTypeJSON is the content type of the Key Vault secret holding a resource's exports.
const ContentTypeJSON = "application/json"

// KeyVaultWriter writes a resource's exports into one Key Vault secret as a JSON map, as Azure
// Service Operator v1 did. The identity it writes with needs only "Key Vault Secrets Officer"
// on the vault (get and set secrets).
type KeyVaultWriter struct {
	// Azure locates the cloud (its CA and whether it is public); credentials come per call.
	Azure azure.Config
	// Options, when set, are the azsecrets client options to use instead of those of Azure
	// (Azure.SecretsOptions() is what they should be).
	Options *azsecrets.ClientOptions

	once    sync.Once
	opts    *azsecrets.ClientOptions
	optsErr error
}

// NewKeyVaultWriter is a KeyVaultWriter for the cloud of cfg.
func NewKeyVaultWriter(cfg azure.Config) *KeyVaultWriter { return &KeyVaultWriter{Azure: cfg} }

// Write makes secret secretName of the vault at vaultURL hold vals as a JSON object (content
// type application/json), authenticating with cred. It reads the current version first and
// sets a new one only when the map or the content type differs. Errors name the vault and the
// secret, never a value.
func (w *KeyVaultWriter) Write(ctx context.Context, cred azcore.TokenCredential, vaultURL, secretName string, vals map[string]string) error {
	if !validSecretName(secretName) {
		return fmt.Errorf("write Key Vault secret: name %q is not 1-127 letters, digits and dashes", secretName)
	}
	// Built once: every client shares the transport and its connections.
	w.once.Do(func() {
		if w.Options != nil {
			w.opts = w.Options
			return
		}
		w.opts, w.optsErr = w.Azure.SecretsOptions()
	})
	if w.optsErr != nil {
		return fmt.Errorf("build Key Vault client options: %w", w.optsErr)
	}
	opts := *w.opts
	c, err := azsecrets.NewClient(vaultURL, cred, &opts)
	if err != nil {
		return fmt.Errorf("build Key Vault client for %s: %w", vaultURL, err)
	}
	if vals == nil {
		vals = map[string]string{}
	}
	cur, err := c.GetSecret(ctx, secretName, "", nil)
	switch {
	case err == nil:
		if cur.Value != nil && cur.ContentType != nil && *cur.ContentType == ContentTypeJSON {
			var have map[string]string
			if json.Unmarshal([]byte(*cur.Value), &have) == nil && maps.Equal(have, vals) && have != nil {
				return nil
			}
		}
	case isStatus(err, http.StatusNotFound):
	default:
		return fmt.Errorf("read Key Vault secret %s in %s: %w", secretName, vaultURL, err)
	}
	body, err := json.Marshal(vals)
	if err != nil {
		return fmt.Errorf("encode exports: %w", err)
	}
	if _, err := c.SetSecret(ctx, secretName, azsecrets.SetSecretParameters{
		Value: ptr.To(string(body)), ContentType: ptr.To(ContentTypeJSON),
		Tags: map[string]*string{"managed-by": ptr.To("cerulean")},
	}, nil); err != nil {
		return fmt.Errorf("set Key Vault secret %s in %s: %w", secretName, vaultURL, err)
	}
	return nil
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// maxSecretName is Key Vault's limit on a secret's name.
const maxSecretName = 127

// KeyVaultSecretName is the Key Vault secret holding a resource's exports:
// "<kind>-<namespace>-<name>" lower-cased, as Azure Service Operator v1 named it. Key Vault
// allows only 1-127 letters, digits and dashes, so when the name has other characters (a "."
// in a Kubernetes name) they become dashes, and when it is too long it is cut; in both cases
// the name ends with "-" and 8 hex digits of a hash of the three parts, so that two resources
// never share a secret. The result is always a valid name.
func KeyVaultSecretName(kind, namespace, name string) string {
	raw := strings.ToLower(kind + "-" + namespace + "-" + name)
	var b strings.Builder
	changed := false
	for _, r := range raw {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			b.WriteRune(r)
			continue
		}
		b.WriteByte('-')
		changed = true
	}
	out := b.String()
	if !changed && len(out) <= maxSecretName {
		return out
	}
	// The hash is of the parts as given, separated unambiguously.
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d:%s%d:%s%d:%s", len(kind), kind, len(namespace), namespace, len(name), name)))
	suffix := "-" + hex.EncodeToString(sum[:4])
	if len(out) > maxSecretName-len(suffix) {
		out = out[:maxSecretName-len(suffix)]
	}
	return out + suffix
}

func validSecretName(s string) bool {
	if s == "" || len(s) > maxSecretName {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
