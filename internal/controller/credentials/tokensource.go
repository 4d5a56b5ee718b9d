package credentials

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// ExchangeAudience is the audience of a service-account token exchanged at Entra ID.
const ExchangeAudience = "api://AzureADTokenExchange"

// ServiceAccountTokenSource is a Settings.TokenSource for a manager that runs outside a pod
// (`cerulean-local up`): it asks the TokenRequest API for the service account's token with audience
// api://AzureADTokenExchange, as a kubelet projects it, and reuses that token until 80% of its
// lifetime has passed, as a kubelet rotates it. now is the clock (time.Now in production).
func ServiceAccountTokenSource(sa corev1client.ServiceAccountsGetter, namespace, name string, now func() time.Time) func(context.Context) (string, error) {
	var (
		mu      sync.Mutex
		token   string
		refresh time.Time
	)
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if token != "" && now().Before(refresh) {
			return token, nil
		}
		tr, err := sa.ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{ExchangeAudience}, ExpirationSeconds: new(int64(3600))},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("request token of service account %s/%s: %w", namespace, name, err)
		}
		lifetime := time.Hour
		if tr.Spec.ExpirationSeconds != nil && *tr.Spec.ExpirationSeconds > 0 {
			lifetime = time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
		}
		token, refresh = tr.Status.Token, now().Add(lifetime*8/10)
		return token, nil
	}
}
