// Package registration is how the manager's webhooks tell kube-apiserver where they are: one
// client config (a Service in a cluster, a URL under `cerulean-local up`), and one
// create-or-update of a webhook configuration that keeps what a CA injector or a Helm release
// wrote there.
package registration

import (
	"context"
	"errors"
	"fmt"
	"maps"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClientConfig says how kube-apiserver reaches the manager's webhook server: exactly one of
// Service (in a cluster) or URL (https://HOST:PORT on loopback under `cerulean-local up`); each
// webhook's path is appended to either.
type ClientConfig struct {
	Service  *admissionregistrationv1.ServiceReference
	URL      string
	CABundle []byte
}

// ErrNoEndpoint reports a ClientConfig with neither a Service nor a URL, or with both.
var ErrNoEndpoint = errors.New("webhook client config needs exactly one of a Service or a URL")

// For is the client config of the webhook served at path.
func (cc ClientConfig) For(path string) (admissionregistrationv1.WebhookClientConfig, error) {
	wcc := admissionregistrationv1.WebhookClientConfig{CABundle: cc.CABundle}
	switch {
	case (cc.Service == nil) == (cc.URL == ""):
		return wcc, ErrNoEndpoint
	case cc.Service != nil:
		svc := *cc.Service
		svc.Path = ptr.To(path)
		wcc.Service = &svc
	default:
		wcc.URL = ptr.To(cc.URL + path)
	}
	return wcc, nil
}

// Meta is the metadata of one of Cerulean's webhook configurations.
func Meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "cerulean"}}
}

// Apply creates or updates want, a *ValidatingWebhookConfiguration or a
// *MutatingWebhookConfiguration. Labels already there (a Helm release's) stay. With keepCA,
// each webhook keeps the CA bundle already there (a CA injector's): its own, or for a webhook
// new to the configuration, its siblings'.
func Apply(ctx context.Context, c client.Client, want client.Object, keepCA bool) error {
	got, ok := want.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("webhook configuration %s: not a client.Object", want.GetName())
	}
	err := c.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, want); err != nil {
			return fmt.Errorf("create webhook configuration %s: %w", want.GetName(), err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get webhook configuration %s: %w", want.GetName(), err)
	}
	switch w := want.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		g := got.(*admissionregistrationv1.ValidatingWebhookConfiguration) //nolint:forcetypeassert // a deep copy of want
		if keepCA {
			keepBundles(g.Webhooks, w.Webhooks, func(h *admissionregistrationv1.ValidatingWebhook) (string, *[]byte) {
				return h.Name, &h.ClientConfig.CABundle
			})
		}
		g.Webhooks = w.Webhooks
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		g := got.(*admissionregistrationv1.MutatingWebhookConfiguration) //nolint:forcetypeassert // a deep copy of want
		if keepCA {
			keepBundles(g.Webhooks, w.Webhooks, func(h *admissionregistrationv1.MutatingWebhook) (string, *[]byte) {
				return h.Name, &h.ClientConfig.CABundle
			})
		}
		g.Webhooks = w.Webhooks
	default:
		return fmt.Errorf("webhook configuration %s: unsupported type %T", want.GetName(), want)
	}
	labels := maps.Clone(got.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, want.GetLabels())
	got.SetLabels(labels)
	if err := c.Update(ctx, got); err != nil {
		return fmt.Errorf("update webhook configuration %s: %w", want.GetName(), err)
	}
	return nil
}

// keepBundles gives each webhook of want the CA bundle its namesake has in got, or, when got
// has none of that name, the first bundle got has.
func keepBundles[W any](got, want []W, bundle func(*W) (string, *[]byte)) {
	byName := map[string][]byte{}
	var first []byte
	for i := range got {
		name, b := bundle(&got[i])
		byName[name] = *b
		if first == nil && len(*b) > 0 {
			first = *b
		}
	}
	for i := range want {
		name, b := bundle(&want[i])
		if kept, ok := byName[name]; ok {
			*b = kept
		} else {
			*b = first
		}
	}
}
