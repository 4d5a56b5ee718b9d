// Package exports writes a resource's connection details where the application reads them.
//
// TEMPORARY: a subset of the contract in the manager helpers' notes (CEL expressions come with
// the full package, which replaces this file on merge). The exported names and signatures are the contract's.
package exports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Destination is a key of a ConfigMap or Secret.
type Destination struct {
	Kind string // "ConfigMap" | "Secret"
	Name string
	Key  string
}

// Value is one exported value.
type Value struct {
	Destination
	Value string
}

// Expression is a CEL expression over the resource.
type Expression struct {
	Destination
	Expr string
}

// ErrUnsupported reports what this subset cannot do yet.
var ErrUnsupported = errors.New("not supported")

// Evaluate evaluates CEL expressions over obj.
func Evaluate(_ map[string]any, exprs []Expression) ([]Value, error) {
	if len(exprs) > 0 {
		return nil, fmt.Errorf("evaluate export expressions: %w", ErrUnsupported)
	}
	return nil, nil
}

// KubeWriter writes values to ConfigMaps and Secrets owned by the resource.
type KubeWriter struct {
	Client client.Client
}

// Write creates or updates the destinations in owner's namespace, owned by owner.
func (w *KubeWriter) Write(ctx context.Context, owner client.Object, vals []Value) error {
	type objKey struct{ kind, name string }
	grouped := map[objKey]map[string]string{}
	for _, v := range vals {
		k := objKey{v.Kind, v.Name}
		if grouped[k] == nil {
			grouped[k] = map[string]string{}
		}
		grouped[k][v.Key] = v.Value
	}
	for k, data := range grouped {
		var obj client.Object
		switch k.kind {
		case "ConfigMap":
			obj = &corev1.ConfigMap{}
		case "Secret":
			obj = &corev1.Secret{}
		default:
			return fmt.Errorf("write export %s: unknown kind %q", k.name, k.kind)
		}
		obj.SetNamespace(owner.GetNamespace())
		obj.SetName(k.name)
		err := w.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read %s %s: %w", k.kind, k.name, err)
		}
		exists := err == nil
		changed := !exists
		if exists && !metav1.IsControlledBy(obj, owner) && !isOwnedBy(obj, owner) {
			return fmt.Errorf("write %s %s: it exists and is not owned by %s", k.kind, k.name, owner.GetName())
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			if o.Data == nil {
				o.Data = map[string]string{}
			}
			for key, v := range data {
				if o.Data[key] != v {
					o.Data[key], changed = v, true
				}
			}
		case *corev1.Secret:
			if o.Data == nil {
				o.Data = map[string][]byte{}
			}
			for key, v := range data {
				if string(o.Data[key]) != v {
					o.Data[key], changed = []byte(v), true
				}
			}
		}
		if !changed {
			continue
		}
		if !exists {
			if err := controllerutil.SetOwnerReference(owner, obj, w.Client.Scheme()); err != nil {
				return fmt.Errorf("own %s %s: %w", k.kind, k.name, err)
			}
			if err := w.Client.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %s %s: %w", k.kind, k.name, err)
			}
			continue
		}
		if err := w.Client.Update(ctx, obj); err != nil {
			return fmt.Errorf("update %s %s: %w", k.kind, k.name, err)
		}
	}
	return nil
}

func isOwnedBy(obj, owner client.Object) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// KeyVaultWriter writes a resource's secret exports to one Key Vault secret.
type KeyVaultWriter struct {
	// Options configure the Key Vault clients (transport, challenge verification).
	Options *azsecrets.ClientOptions
}

// Write stores vals as one JSON map in secret secretName of the vault at vaultURL, only when
// the stored value differs.
func (w *KeyVaultWriter) Write(ctx context.Context, cred azcore.TokenCredential, vaultURL, secretName string, vals map[string]string) error {
	c, err := azsecrets.NewClient(vaultURL, cred, w.Options)
	if err != nil {
		return fmt.Errorf("create Key Vault client: %w", err)
	}
	b, err := json.Marshal(vals)
	if err != nil {
		return fmt.Errorf("encode secret %s: %w", secretName, err)
	}
	cur, err := c.GetSecret(ctx, secretName, "", nil)
	if err == nil && cur.Value != nil && *cur.Value == string(b) {
		return nil
	}
	var re *azcore.ResponseError
	if err != nil && (!errors.As(err, &re) || re.StatusCode != http.StatusNotFound) {
		return fmt.Errorf("read Key Vault secret %s: %w", secretName, err)
	}
	value, contentType := string(b), "application/json"
	if _, err := c.SetSecret(ctx, secretName, azsecrets.SetSecretParameters{Value: &value, ContentType: &contentType}, nil); err != nil {
		return fmt.Errorf("write Key Vault secret %s: %w", secretName, err)
	}
	return nil
}

var kvInvalid = regexp.MustCompile(`[^0-9a-zA-Z-]+`)

// KeyVaultSecretName is "<kind>-<namespace>-<name>", lower-cased and made valid for Key Vault.
func KeyVaultSecretName(kind, namespace, name string) string {
	s := kvInvalid.ReplaceAllString(strings.ToLower(kind+"-"+namespace+"-"+name), "-")
	if len(s) > 127 {
		s = s[:127]
	}
	return s
}
