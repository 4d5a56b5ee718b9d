// Package kubefederation_test exchanges real Kubernetes service-account tokens, from the devenv
// kube-apiserver's TokenRequest API, at the local cloud's Entra ID: workload identity federation
// end to end, with the issuer's documents fetched over HTTPS exactly as Azure fetches an AKS
// issuer's.
package kubefederation_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

const audience = "api://AzureADTokenExchange"

func TestServiceAccountTokenExchange(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	ctx := t.Context()
	c, err := cloud.Start(ctx, cloud.Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(), TrustCAs: [][]byte{cp.CACertPEM},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s := c.Settings()

	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	for _, name := range []string{"workload", "other"} {
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create service account: %v", err)
		}
	}
	saToken := func(name string) string {
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		return tr.Status.Token
	}

	dir := c.Entra().Directory
	mi, err := dir.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "workload",
		ResourceID: "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/workload"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.PutFederatedCredential(ctx, s.TenantID, mi.ClientID, entra.FederatedCredential{
		Name: "kube", Issuer: cp.IssuerURL, Subject: "system:serviceaccount:default:workload", Audiences: []string{audience},
	}); err != nil {
		t.Fatal(err)
	}

	exchange := func(token string) (string, error) {
		cred, err := azidentity.NewClientAssertionCredential(s.TenantID, mi.ClientID,
			func(context.Context) (string, error) { return token, nil },
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: c.ClientOptions(), DisableInstanceDiscovery: true})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://vault.azure.net/.default"}})
		return tok.Token, err
	}
	tok, err := exchange(saToken("workload"))
	if err != nil {
		t.Fatalf("exchange the service-account token: %v", err)
	}
	claims, err := c.Entra().Verify(ctx, tok, func(aud string) bool { return aud == "https://vault.azure.net" })
	if err != nil {
		t.Fatal(err)
	}
	if claims.ObjectID != mi.ObjectID || claims.AppID != mi.ClientID || claims.MIResource != mi.ResourceID {
		t.Errorf("claims = %+v", claims)
	}

	_, err = exchange(saToken("other"))
	if err == nil || !strings.Contains(err.Error(), "AADSTS700213") || !strings.Contains(err.Error(), "system:serviceaccount:default:other") {
		t.Fatalf("another service account's token: got %v, want AADSTS700213 naming its subject", err)
	}
}
