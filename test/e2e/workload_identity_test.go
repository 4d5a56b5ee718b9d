package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
)

// The workload identity flow on the whole system: `up` registers its cluster in the local cloud
// with the control plane's issuer; a managed identity trusts that issuer for one service account;
// that service account's projected-style token from kube-apiserver is exchanged for an access
// token, and another service account's is refused.
func TestWorkloadIdentityFederationAgainstTheLocalCluster(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	defer stopAndCheck(t, up, dir, syscall.SIGINT)
	ctx := t.Context()
	kubeconfig := env["KUBECONFIG"]

	issuer := env["CERULEAN_OIDC_ISSUER"]
	server := kubectl(t, kubeconfig, "config", "view", "-o", "jsonpath={.clusters[0].cluster.server}")
	if issuer != server {
		t.Fatalf("CERULEAN_OIDC_ISSUER=%q, want the control plane's issuer %q", issuer, server)
	}

	opts := clientOptions(t, env)
	admin, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	sub := env["AZURE_SUBSCRIPTION_ID"]

	// The cluster id in DIR/env names a cluster whose issuer ARM reports as the control plane's.
	clusters, err := armcontainerservice.NewManagedClustersClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	rg, name := resourceGroupAndName(t, env["CERULEAN_CLUSTER_ID"])
	mc, err := clusters.Get(ctx, rg, name, nil)
	if err != nil {
		t.Fatalf("get cluster %s: %v", env["CERULEAN_CLUSTER_ID"], err)
	}
	if got := *mc.Properties.OidcIssuerProfile.IssuerURL; got != issuer {
		t.Errorf("cluster issuerURL %q, want %q", got, issuer)
	}
	if !*mc.Properties.SecurityProfile.WorkloadIdentity.Enabled {
		t.Error("workload identity is not enabled on the cluster")
	}

	identities, err := armmsi.NewUserAssignedIdentitiesClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := identities.CreateOrUpdate(ctx, rg, "e2e-app", armmsi.Identity{Location: to.Ptr("local")}, nil)
	if err != nil {
		t.Fatalf("create identity: %v", err)
	}
	fics, err := armmsi.NewFederatedIdentityCredentialsClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fics.CreateOrUpdate(ctx, rg, "e2e-app", "default-sa", armmsi.FederatedIdentityCredential{
		Properties: &armmsi.FederatedIdentityCredentialProperties{
			Issuer:    to.Ptr(issuer),
			Subject:   to.Ptr("system:serviceaccount:default:default"),
			Audiences: []*string{to.Ptr("api://AzureADTokenExchange")},
		},
	}, nil)
	if err != nil {
		t.Fatalf("create federated credential: %v", err)
	}

	exchange := func(serviceAccount string) (string, error) {
		cred, err := azidentity.NewClientAssertionCredential(env["AZURE_TENANT_ID"], *mi.Properties.ClientID,
			func(context.Context) (string, error) {
				return kubectl(t, kubeconfig, "create", "token", serviceAccount, "--audience", "api://AzureADTokenExchange"), nil
			},
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
		if err != nil {
			return "", err
		}
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope(env)}})
		return tok.Token, err
	}

	token, err := exchange("default")
	if err != nil {
		t.Fatalf("exchange the default service account's token: %v", err)
	}
	if mirid := claim(t, token, "xms_mirid"); !strings.EqualFold(mirid, *mi.ID) {
		t.Errorf("xms_mirid %q, want the identity %q", mirid, *mi.ID)
	}

	kubectl(t, kubeconfig, "create", "serviceaccount", "other")
	if _, err := exchange("other"); err == nil || !strings.Contains(err.Error(), "AADSTS70021") && !strings.Contains(err.Error(), "AADSTS700213") {
		t.Errorf("a service account the identity does not trust: err=%v, want AADSTS70021/700213", err)
	}
}

func resourceGroupAndName(t *testing.T, id string) (string, string) {
	t.Helper()
	parts := strings.Split(id, "/")
	if len(parts) != 9 || !strings.EqualFold(parts[3], "resourceGroups") {
		t.Fatalf("%q is not a resource id in a group", id)
	}
	return parts[4], parts[8]
}

// claim reads one string claim of a JWT without verifying it: the cloud's own tests verify.
func claim(t *testing.T, token, name string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("access token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("decode token payload: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatalf("decode token claims: %v", err)
	}
	s, _ := claims[name].(string)
	return s
}
