package integration_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"

	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

func TestSubscriptions(t *testing.T) {
	e := start(t)
	client, err := armsubscriptions.NewClient(e.cred, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.Get(t.Context(), e.s.SubscriptionID, nil)
	if err != nil {
		t.Fatalf("get subscription: %v", err)
	}
	if *got.SubscriptionID != e.s.SubscriptionID || *got.ID != "/subscriptions/"+e.s.SubscriptionID || *got.State != armsubscriptions.SubscriptionStateEnabled {
		t.Errorf("subscription = %+v", got.Subscription)
	}
	var n int
	for pager := client.NewListPager(nil); pager.More(); {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatalf("list subscriptions: %v", err)
		}
		n += len(page.Value)
	}
	if n != 1 {
		t.Errorf("listed %d subscriptions, want 1", n)
	}
	_, err = client.Get(t.Context(), "00000000-0000-0000-0000-000000000001", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SubscriptionNotFound")
}

func TestResourceGroups(t *testing.T) {
	e := start(t)
	c := e.clients(t, e.cred)
	ctx := t.Context()

	created, err := c.groups.CreateOrUpdate(ctx, "Team-RG", armresources.ResourceGroup{Location: ptr("West Europe"), Tags: map[string]*string{"env": ptr("dev")}}, nil)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if *created.ID != e.rgID("Team-RG") || *created.Location != "westeurope" || *created.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("created = %+v", created.ResourceGroup)
	}
	// Names are case-insensitive; the id keeps the case of creation.
	got, err := c.groups.Get(ctx, "team-rg", nil)
	if err != nil || *got.ID != e.rgID("Team-RG") || *got.Tags["env"] != "dev" {
		t.Fatalf("get: %v %+v", err, got)
	}
	if _, err := c.groups.CreateOrUpdate(ctx, "team-rg", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err == nil {
		t.Error("moving a group to another location succeeded")
	} else {
		cloudtest.RespErr(t, err, http.StatusConflict, "InvalidResourceGroupLocation")
	}
	ex, err := c.groups.CheckExistence(ctx, "TEAM-RG", nil)
	if err != nil || !ex.Success {
		t.Fatalf("check existence: %v %v", err, ex.Success)
	}
	ex, err = c.groups.CheckExistence(ctx, "missing", nil)
	if err != nil || ex.Success {
		t.Fatalf("check existence of a missing group: %v %v", err, ex.Success)
	}
	_, err = c.groups.Get(ctx, "missing", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceGroupNotFound")
	if _, err := c.groups.CreateOrUpdate(ctx, "second", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	var names []string
	for pager := c.groups.NewListPager(nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, g := range page.Value {
			names = append(names, *g.Name)
		}
	}
	if strings.Join(names, ",") != "second,Team-RG" {
		t.Errorf("listed %v", names)
	}
}

// TestResourceGroupDeleteTakesContents deletes a group holding an identity (with a federated
// credential and a role assignment on it) through the SDK's poller.
func TestResourceGroupDeleteTakesContents(t *testing.T) {
	e := start(t)
	c := e.clients(t, e.cred)
	ctx := t.Context()
	if _, err := c.groups.CreateOrUpdate(ctx, "doomed", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.groups.CreateOrUpdate(ctx, "kept", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	mi, err := c.identities.CreateOrUpdate(ctx, "doomed", "app", armmsi.Identity{Location: ptr("eastus")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keptMI, err := c.identities.CreateOrUpdate(ctx, "kept", "app", armmsi.Identity{Location: ptr("eastus")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.fics.CreateOrUpdate(ctx, "doomed", "app", "k8s", armmsi.FederatedIdentityCredential{Properties: &armmsi.FederatedIdentityCredentialProperties{
		Issuer: ptr("https://issuer.example"), Subject: ptr("system:serviceaccount:a:b"), Audiences: []*string{ptr(exchangeAudience)},
	}}, nil); err != nil {
		t.Fatal(err)
	}
	raName := "3b1f4c59-2f4a-4c2e-9a43-7d3e2a6b9f10"
	if _, err := c.assignments.Create(ctx, e.rgID("doomed"), raName, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: ptr(e.roleDefID(authz.Reader)), PrincipalID: keptMI.Properties.PrincipalID,
	}}, nil); err != nil {
		t.Fatal(err)
	}

	poller, err := c.groups.BeginDelete(ctx, "Doomed", nil)
	if err != nil {
		t.Fatalf("begin delete: %v", err)
	}
	if _, err := poller.PollUntilDone(ctx, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = c.groups.Get(ctx, "doomed", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceGroupNotFound")
	_, err = c.identities.Get(ctx, "doomed", "app", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceGroupNotFound")
	if _, err := e.c.Entra().Directory.Principal(ctx, e.s.TenantID, *mi.Properties.ClientID); err == nil {
		t.Error("the deleted identity's principal still exists")
	}
	_, err = c.assignments.Get(ctx, e.rgID("doomed"), raName, nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "RoleAssignmentNotFound")
	if _, err := c.identities.Get(ctx, "kept", "app", nil); err != nil {
		t.Errorf("the other group's identity: %v", err)
	}
	// The group can be made again, empty.
	if _, err := c.groups.CreateOrUpdate(ctx, "doomed", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.identities.Get(ctx, "doomed", "app", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
	_, err = c.groups.BeginDelete(ctx, "never-made", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceGroupNotFound")
}

// TestLROHeaders checks the 202's polling headers and the short Retry-After.
func TestLROHeaders(t *testing.T) {
	e := start(t)
	tok := cloudtest.Token(t, e.cred, armScope)
	if st, _, body := e.do(t, http.MethodPut, e.rgID("g")+"?api-version=2021-04-01", tok, `{"location":"eastus"}`); st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, body)
	}
	st, h, _ := e.do(t, http.MethodDelete, e.rgID("g")+"?api-version=2021-04-01", tok, "")
	if st != http.StatusAccepted {
		t.Fatalf("delete: %d", st)
	}
	async, loc := h.Get("Azure-AsyncOperation"), h.Get("Location")
	if !strings.HasPrefix(async, e.s.URL+"/subscriptions/") || !strings.HasPrefix(loc, e.s.URL+"/subscriptions/") ||
		h.Get("Retry-After") != "1" || h.Get("retry-after-ms") != "20" {
		t.Fatalf("headers = %v", h)
	}
	for range 100 {
		_, _, body := e.do(t, http.MethodGet, async, tok, "")
		if body["status"] == "Succeeded" {
			break
		}
	}
	if st, _, body := e.do(t, http.MethodGet, async, tok, ""); st != http.StatusOK || body["status"] != "Succeeded" {
		t.Fatalf("status: %d %v", st, body)
	}
	if st, _, _ := e.do(t, http.MethodGet, loc, tok, ""); st != http.StatusOK {
		t.Fatalf("result: %d", st)
	}
	// Another principal without a role cannot poll it.
	_, other := cloudtest.NewPrincipal(t, e.c, "other")
	st, h, body := e.do(t, http.MethodGet, async, cloudtest.Token(t, other, armScope), "")
	wantARMError(t, st, h, body, http.StatusForbidden, "AuthorizationFailed")
}
