package up_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/go-logr/logr"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/internal/up"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

const roleContributor = "b24988ac-6180-42a0-ab88-20f7382dd24c"

// Under up no pod runs the manager, yet a namespace's aso-credential secret with
// USE_WORKLOAD_IDENTITY_AUTH=true works: the manager exchanges the token of ServiceAccount
// cerulean-system/cerulean-manager (from the TokenRequest API) for the named identity's token,
// and its ARM writes are made as that identity. Without a federated credential trusting that
// subject, the resource reports the credential failure (SecretNotFound, retried).
func TestWorkloadIdentityCredentialUnderUp(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	az := cloudtest.Start(t, cloud.Options{TrustCAs: [][]byte{cp.CACertPEM}, ARM: cloudtest.FastARM()})
	s := az.Settings()
	ctx := t.Context()
	clients := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	if err := manager.InstallCRDs(ctx, cp.RESTConfig); err != nil {
		t.Fatal(err)
	}
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	// Two identities with Contributor on the subscription; only "trusted" federates the
	// manager's ServiceAccount on the control plane's issuer.
	owner := cloudtest.OwnerCred(t, az)
	cloudtest.CreateGroup(t, az, owner, cloudtest.ARMOptions(az), "westus2", "identities")
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	roles, err := armauthorization.NewRoleAssignmentsClient(s.SubscriptionID, owner, cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	identity := func(name string) armmsi.Identity {
		res, err := ids.CreateOrUpdate(ctx, "identities", name, armmsi.Identity{Location: to.Ptr("westus2")}, nil)
		if err != nil {
			t.Fatalf("create identity %s: %v", name, err)
		}
		if _, err := roles.Create(ctx, "/subscriptions/"+s.SubscriptionID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{
			Properties: &armauthorization.RoleAssignmentProperties{
				RoleDefinitionID: to.Ptr("/subscriptions/" + s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + roleContributor),
				PrincipalID:      res.Properties.PrincipalID, PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
			},
		}, nil); err != nil {
			t.Fatalf("assign Contributor to %s: %v", name, err)
		}
		return res.Identity
	}
	trusted, untrusted := identity("trusted"), identity("untrusted")
	fics, err := armmsi.NewFederatedIdentityCredentialsClient(s.SubscriptionID, owner, cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fics.CreateOrUpdate(ctx, "identities", "trusted", "cerulean-manager", armmsi.FederatedIdentityCredential{
		Properties: &armmsi.FederatedIdentityCredentialProperties{
			Issuer:    to.Ptr(cp.IssuerURL),
			Subject:   to.Ptr("system:serviceaccount:" + up.ManagerNamespace + ":" + up.ManagerServiceAccount),
			Audiences: []*string{to.Ptr(credentials.ExchangeAudience)},
		},
	}, nil); err != nil {
		t.Fatalf("create federated credential: %v", err)
	}

	// A namespace per identity, each with its aso-credential secret.
	namespace := func(name string, id armmsi.Identity) string {
		if _, err := clients.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := clients.CoreV1().Secrets(name).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: credentials.NamespaceSecretName},
			StringData: map[string]string{
				credentials.KeySubscriptionID: s.SubscriptionID, credentials.KeyTenantID: s.TenantID,
				credentials.KeyClientID: *id.Properties.ClientID, credentials.KeyUseWorkloadIdentity: "true",
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	suffix := uuid.NewString()[:6]
	good, bad := namespace("wi-good-"+suffix, trusted), namespace("wi-bad-"+suffix, untrusted)

	// The manager as up runs it: the bootstrap principal as global credential, the ServiceAccount's
	// tokens for workload identity. Asked twice, as at each start: idempotent.
	if _, err := up.ManagerTokenSource(ctx, clients, time.Now); err != nil {
		t.Fatal(err)
	}
	tokens, err := up.ManagerTokenSource(ctx, clients, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	mgrCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &cloudtest.SyncBuffer{}
	go func() {
		done <- manager.Run(mgrCtx, manager.Options{
			REST: cp.RESTConfig,
			Azure: azure.Config{
				TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
				AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
				ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
			},
			SyncPeriod: time.Minute, PollInterval: 100 * time.Millisecond, TargetNamespaces: []string{good, bad},
			MetricsAddr: "0", HealthAddr: "0", SkipNameValidation: true, TokenSource: tokens,
			Logger: logr.FromSlogHandler(cloudtest.DebugLogger(logs).Handler()),
		})
	}()
	t.Cleanup(func() {
		cleanup, stop := context.WithTimeout(context.Background(), time.Minute)
		defer stop()
		for _, ns := range []string{good, bad} {
			rg := resourceGroup(ns)
			_ = c.Delete(cleanup, rg)
			for c.Get(cleanup, client.ObjectKeyFromObject(rg), rg) == nil && cleanup.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			lines := strings.Split(logs.String(), "\n")
			t.Logf("manager log (end):\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})

	since := az.RequestLog().Last()
	for _, ns := range []string{good, bad} {
		if err := c.Create(ctx, resourceGroup(ns)); err != nil {
			t.Fatal(err)
		}
	}
	goodRG := waitCondition(t, c, resourceGroup(good), func(st, _, _, _ string) bool { return st == "True" })
	armID := goodRG.GetAnnotations()["serviceoperator.azure.com/resource-id"]
	puts := az.Requests(reqlog.Filter{Service: "arm", Method: "PUT", PathPrefix: "/subscriptions/" + s.SubscriptionID + "/resourceGroups/" + good, Since: since})
	if len(puts) == 0 {
		t.Fatalf("no ARM PUT of resource group %s (id %q)", good, armID)
	}
	for _, p := range puts {
		if p.Principal != *trusted.Properties.PrincipalID {
			t.Errorf("resource group written by principal %q, want the trusted identity %q (bootstrap is %q)", p.Principal, *trusted.Properties.PrincipalID, s.ObjectID)
		}
	}

	badRG := waitCondition(t, c, resourceGroup(bad), func(st, sev, reason, _ string) bool {
		return st == "False" && sev == "Warning" && reason == "SecretNotFound"
	})
	_, _, _, msg := readyOf(badRG)
	t.Logf("without a federated credential: %s", msg)
	if !strings.Contains(msg, "AADSTS") || !strings.Contains(msg, credentials.NamespaceSecretName) {
		t.Errorf("failure message does not name the credential and Entra's error: %s", msg)
	}
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "PUT", PathPrefix: "/subscriptions/" + s.SubscriptionID + "/resourceGroups/" + bad}); n != 0 {
		t.Errorf("%d ARM writes of %s without a usable credential", n, bad)
	}
	tok, err := tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), tok) || strings.Contains(msg, tok) {
		t.Error("the service-account token reached the manager's log or a condition")
	}
}

// resourceGroup is a ResourceGroup named after its namespace.
func resourceGroup(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resources.azure.com/v1api20200601", "kind": "ResourceGroup",
		"metadata": map[string]any{"namespace": ns, "name": ns},
		"spec":     map[string]any{"location": "westus2"},
	}}
	return u
}

// readyOf is the Ready condition's status, severity, reason and message.
func readyOf(u *unstructured.Unstructured) (status, severity, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			status, _ = m["status"].(string)
			severity, _ = m["severity"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return
}

// waitCondition polls the object until its Ready condition satisfies ok, for at most a minute.
func waitCondition(t *testing.T, c client.Client, u *unstructured.Unstructured, ok func(status, severity, reason, message string) bool) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last string
	for {
		got := u.DeepCopy()
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(u), got); err == nil {
			st, sev, reason, msg := readyOf(got)
			if ok(st, sev, reason, msg) {
				return got
			}
			last = st + " " + sev + " " + reason + ": " + msg
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: Ready condition not as expected; last %s", u.GetNamespace(), u.GetName(), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
