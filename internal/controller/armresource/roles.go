package armresource

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/controller/credentials"
)

// roleCache maps subscription/lower(role name) to a role definition id: bounded by the roles
// the specs name, not by objects.
type roleCache struct{ m sync.Map }

// body builds the request body from the spec.
func (r *Reconciler) body(ctx context.Context, obj *unstructured.Unstructured, cred *credentials.Credential) (map[string]any, error) {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	body, err := armBody(spec, r.opts.Kind.Flatten, func(name, key string) (string, error) {
		cm := &corev1.ConfigMap{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return "", fmt.Errorf("%w: ConfigMap %s does not exist", errConfigMap, name)
			}
			return "", fmt.Errorf("read ConfigMap %s: %w", name, err)
		}
		v, ok := cm.Data[key]
		if !ok {
			return "", fmt.Errorf("%w: ConfigMap %s has no key %s", errConfigMap, name, key)
		}
		return v, nil
	})
	if err != nil {
		return nil, err
	}
	if r.opts.Kind.Prepare != nil {
		env := &prepareEnv{r: r, cred: cred, namespace: obj.GetNamespace()}
		if err := r.opts.Kind.Prepare(ctx, env, body); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// prepareEnv is what Prepare may use.
type prepareEnv struct {
	r         *Reconciler
	cred      *credentials.Credential
	namespace string
}

// roleID resolves a role name to its definition id in the credential's subscription.
func (e *prepareEnv) roleID(ctx context.Context, name string) (string, error) {
	key := e.cred.SubscriptionID + "/" + strings.ToLower(name)
	if id, ok := e.r.roles.m.Load(key); ok {
		return id.(string), nil
	}
	c, err := e.r.newARM(e.cred.Cached())
	if err != nil {
		return "", err
	}
	defs, err := c.list(ctx, "/subscriptions/"+e.cred.SubscriptionID+"/providers/Microsoft.Authorization/roleDefinitions", "2022-04-01",
		"roleName eq '"+strings.ReplaceAll(name, "'", "''")+"'")
	if err != nil {
		return "", fmt.Errorf("look up role %q: %w", name, err)
	}
	for _, d := range defs {
		props, _ := d["properties"].(map[string]any)
		if rn, _ := props["roleName"].(string); strings.EqualFold(rn, name) {
			id, _ := d["id"].(string)
			e.r.roles.m.Store(key, id)
			return id, nil
		}
	}
	return "", fmt.Errorf("%w: no role named %q", errInvalidSpec, name)
}

// referenceID resolves a reference to one of our objects to its ARM id.
func (e *prepareEnv) referenceID(ctx context.Context, group, kind, name string) (string, error) {
	return e.r.readyID(ctx, e.namespace, group, kind, name, errReference, errReference)
}
