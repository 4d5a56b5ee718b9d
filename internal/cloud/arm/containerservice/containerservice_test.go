package containerservice_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

type fixture struct {
	cloud    *cloud.Cloud
	cred     azcore.TokenCredential
	clusters *armcontainerservice.ManagedClustersClient
}

// newFixture starts an in-process cloud and a resource group "rg", and returns a real
// armcontainerservice client authenticated as the bootstrap principal (Owner).
func newFixture(t *testing.T) fixture {
	t.Helper()
	c := cloudtest.Start(t, cloud.Options{})
	cred := cloudtest.OwnerCred(t, c)
	opts := &arm.ClientOptions{ClientOptions: c.ClientOptions()}
	cloudtest.CreateGroup(t, c, cred, opts, "westeurope", "rg")
	clusters, err := armcontainerservice.NewManagedClustersClient(c.Settings().SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{cloud: c, cred: cred, clusters: clusters}
}

func (f fixture) put(t *testing.T, name string, oidc, workloadIdentity *bool) (armcontainerservice.ManagedCluster, error) {
	t.Helper()
	props := &armcontainerservice.ManagedClusterProperties{
		DNSPrefix:         to.Ptr(name + "-dns"),
		KubernetesVersion: to.Ptr("1.36"),
		AgentPoolProfiles: []*armcontainerservice.ManagedClusterAgentPoolProfile{{Name: to.Ptr("system"), Count: to.Ptr[int32](1)}},
	}
	if oidc != nil {
		props.OidcIssuerProfile = &armcontainerservice.ManagedClusterOIDCIssuerProfile{Enabled: oidc}
	}
	if workloadIdentity != nil {
		props.SecurityProfile = &armcontainerservice.ManagedClusterSecurityProfile{
			WorkloadIdentity: &armcontainerservice.ManagedClusterSecurityProfileWorkloadIdentity{Enabled: workloadIdentity},
		}
	}
	poller, err := f.clusters.BeginCreateOrUpdate(t.Context(), "rg", name, armcontainerservice.ManagedCluster{
		Location: to.Ptr("West Europe"), Properties: props,
	}, nil)
	if err != nil {
		return armcontainerservice.ManagedCluster{}, err
	}
	res, err := poller.PollUntilDone(t.Context(), nil)
	return res.ManagedCluster, err
}

func errorCode(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func TestClusterIssuerAndWorkloadIdentity(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()

	mc, err := f.put(t, "aks-1", to.Ptr(true), to.Ptr(true))
	if err != nil {
		t.Fatalf("create cluster: %v", err)
	}
	issuer := *mc.Properties.OidcIssuerProfile.IssuerURL
	base := f.cloud.Settings().URL + "/oidc/" + f.cloud.Settings().TenantID + "/"
	if !strings.HasPrefix(issuer, base) || !strings.HasSuffix(issuer, "/") {
		t.Errorf("issuerURL %q, want one under %q ending in /", issuer, base)
	}
	if !*mc.Properties.SecurityProfile.WorkloadIdentity.Enabled {
		t.Error("workload identity not enabled")
	}
	if mc.Properties.DNSPrefix == nil || *mc.Properties.DNSPrefix != "aks-1-dns" {
		t.Errorf("dnsPrefix did not round-trip: %v", mc.Properties.DNSPrefix)
	}

	// The issuer URL is the cluster's for life: another PUT keeps it.
	again, err := f.put(t, "aks-1", to.Ptr(true), to.Ptr(true))
	if err != nil {
		t.Fatalf("update cluster: %v", err)
	}
	if got := *again.Properties.OidcIssuerProfile.IssuerURL; got != issuer {
		t.Errorf("issuerURL changed on update: %q, then %q", issuer, got)
	}
	other, err := f.put(t, "aks-2", to.Ptr(true), nil)
	if err != nil {
		t.Fatalf("create second cluster: %v", err)
	}
	if *other.Properties.OidcIssuerProfile.IssuerURL == issuer {
		t.Error("two clusters share an issuer URL")
	}

	// The OIDC issuer cannot be turned off once on, as in AKS; nothing changes.
	if _, err := f.put(t, "aks-1", to.Ptr(false), to.Ptr(false)); errorCode(err) != "OIDCIssuerFeatureCannotBeDisabled" {
		t.Errorf("disable the OIDC issuer: %v, want OIDCIssuerFeatureCannotBeDisabled", err)
	}
	got, err := f.clusters.Get(ctx, "rg", "aks-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !*got.Properties.OidcIssuerProfile.Enabled || !*got.Properties.SecurityProfile.WorkloadIdentity.Enabled {
		t.Error("a refused update changed the cluster")
	}

	// Binding to a local control plane makes its issuer the cluster's.
	const bound = "https://127.0.0.1:6443"
	if err := f.cloud.BindCluster(ctx, *mc.ID, bound); err != nil {
		t.Fatalf("bind: %v", err)
	}
	got, err = f.clusters.Get(ctx, "rg", "aks-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if u := *got.Properties.OidcIssuerProfile.IssuerURL; u != bound {
		t.Errorf("bound cluster's issuerURL %q, want %q", u, bound)
	}
}

func TestClusterBadInputWritesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()

	if _, err := f.put(t, "wi-only", to.Ptr(false), to.Ptr(true)); errorCode(err) != "OIDCIssuerNotEnabled" {
		t.Errorf("workload identity without the issuer: %v, want OIDCIssuerNotEnabled", err)
	}
	if _, err := f.clusters.Get(ctx, "rg", "wi-only", nil); errorCode(err) != "ResourceNotFound" {
		t.Errorf("a refused create left a cluster behind: %v", err)
	}
	if _, err := f.put(t, "-bad-", nil, nil); errorCode(err) == "" {
		t.Errorf("a name out of the rules was accepted: %v", err)
	}
	if _, err := f.put(t, strings.Repeat("a", 64), nil, nil); errorCode(err) == "" {
		t.Errorf("a 64-character name was accepted: %v", err)
	}
	mc, err := f.put(t, "plain", nil, nil)
	if err != nil {
		t.Fatalf("create a cluster without an issuer: %v", err)
	}
	if p := mc.Properties.OidcIssuerProfile; p == nil || *p.Enabled || p.IssuerURL != nil {
		t.Errorf("a cluster without the OIDC issuer reports %+v", p)
	}

	for _, bad := range []string{"http://127.0.0.1:6443", "not a url"} {
		if err := f.cloud.BindCluster(ctx, *mc.ID, bad); err == nil {
			t.Errorf("bind to %q was accepted", bad)
		}
	}
	missing := strings.Replace(*mc.ID, "/plain", "/missing", 1)
	if err := f.cloud.BindCluster(ctx, missing, "https://127.0.0.1:6443"); err == nil {
		t.Error("bind of a cluster that does not exist was accepted")
	}
}

func TestClusterListAndDelete(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	for _, n := range []string{"a1", "a2"} {
		if _, err := f.put(t, n, to.Ptr(true), nil); err != nil {
			t.Fatal(err)
		}
	}
	count := func(pager interface {
		More() bool
	}, next func() (int, error)) int {
		n := 0
		for pager.More() {
			c, err := next()
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			n += c
		}
		return n
	}
	byGroup := f.clusters.NewListByResourceGroupPager("rg", nil)
	if n := count(byGroup, func() (int, error) {
		p, err := byGroup.NextPage(ctx)
		return len(p.Value), err
	}); n != 2 {
		t.Errorf("list by resource group: %d clusters, want 2", n)
	}
	all := f.clusters.NewListPager(nil)
	if n := count(all, func() (int, error) {
		p, err := all.NextPage(ctx)
		return len(p.Value), err
	}); n != 2 {
		t.Errorf("list in the subscription: %d clusters, want 2", n)
	}

	poller, err := f.clusters.BeginDelete(ctx, "rg", "a1", nil)
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := poller.PollUntilDone(ctx, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := f.clusters.Get(ctx, "rg", "a1", nil); errorCode(err) != "ResourceNotFound" {
		t.Errorf("get after delete: %v, want ResourceNotFound", err)
	}
}

func TestClusterRefusesUnknownAPIVersion(t *testing.T) {
	f := newFixture(t)
	s := f.cloud.Settings()
	tok, err := f.cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{s.ResourceManagerAudience + ".default"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet,
		s.URL+"/subscriptions/"+s.SubscriptionID+"/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/x?api-version=1999-01-01", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := (&http.Client{Transport: f.cloud.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("x-ms-error-code") != "InvalidApiVersionParameter" {
		t.Errorf("status %d, code %q; want 400 InvalidApiVersionParameter", resp.StatusCode, resp.Header.Get("x-ms-error-code"))
	}
}

// A tags PATCH replaces the tags it carries and keeps them when it carries none.
func TestClusterUpdateTags(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.put(t, "tagged", nil, nil); err != nil {
		t.Fatal(err)
	}
	update := func(tags map[string]*string) map[string]*string {
		t.Helper()
		poller, err := f.clusters.BeginUpdateTags(ctx, "rg", "tagged", armcontainerservice.TagsObject{Tags: tags}, nil)
		if err != nil {
			t.Fatalf("update tags: %v", err)
		}
		res, err := poller.PollUntilDone(ctx, nil)
		if err != nil {
			t.Fatalf("update tags: %v", err)
		}
		return res.Tags
	}
	if got := update(map[string]*string{"env": to.Ptr("dev")}); got["env"] == nil || *got["env"] != "dev" {
		t.Fatalf("tags after a PATCH with env=dev: %v", got)
	}
	if got := update(nil); got["env"] == nil || *got["env"] != "dev" {
		t.Errorf("a PATCH without tags dropped them: %v", got)
	}
}
