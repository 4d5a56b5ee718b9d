package up

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/controller/credentials"
)

// The manager's ServiceAccount under up. No pod runs it, but a credential secret with
// USE_WORKLOAD_IDENTITY_AUTH=true exchanges this account's token, so a federated credential
// trusts the subject system:serviceaccount:cerulean-system:cerulean-manager.
const (
	ManagerNamespace      = "cerulean-system"
	ManagerServiceAccount = "cerulean-manager"
)

// ManagerTokenSource makes sure the manager's namespace and ServiceAccount exist (creating
// them when missing) and returns the source of that account's tokens for workload identity:
// the TokenRequest API, audience api://AzureADTokenExchange, as a kubelet would project them.
// now is the clock (time.Now in production).
func ManagerTokenSource(ctx context.Context, clients kubernetes.Interface, now func() time.Time) (func(context.Context) (string, error), error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}
	if _, err := clients.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", ManagerNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: ManagerServiceAccount}}
	if _, err := clients.CoreV1().ServiceAccounts(ManagerNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", ManagerNamespace, ManagerServiceAccount, err)
	}
	return credentials.ServiceAccountTokenSource(clients.CoreV1(), ManagerNamespace, ManagerServiceAccount, now), nil
}
