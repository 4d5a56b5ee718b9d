package up

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/manager"
)

// SampleGrant is the NamespaceGrant up writes: namespace default (where config/samples go) may
// use every identity and the local subscription, as the one tenant of a one-machine cluster.
const SampleGrant = "cerulean-up-default"

// grantSamples writes SampleGrant (kept if it exists: an admin may have narrowed it).
func grantSamples(ctx context.Context, rc *rest.Config, subscription string) error {
	scheme, err := manager.Scheme()
	if err != nil {
		return err
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("connect to kube-apiserver: %w", err)
	}
	g := &ceruleanv1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: SampleGrant}, Spec: ceruleanv1.NamespaceGrantSpec{
		Namespaces: []string{"default"}, Identities: []string{"*"}, Scopes: []string{"/subscriptions/" + subscription}}}
	if err := c.Create(ctx, g); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("grant namespace default: %w", err)
	}
	return nil
}
