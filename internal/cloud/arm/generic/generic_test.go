package generic_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cosmos/armcosmos/v3"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/eventhub/armeventhub"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/servicebus/armservicebus"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

var poll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}

type env struct {
	c    *cloud.Cloud
	sub  string
	cred azcore.TokenCredential
	opts *azarm.ClientOptions
}

func start(t *testing.T, dataDir string) env {
	t.Helper()
	c := cloudtest.Start(t, cloud.Options{Logger: slog.New(slog.DiscardHandler), ARM: cloudtest.FastARM(), DataDir: dataDir})
	e := env{c: c, sub: c.Settings().SubscriptionID, cred: cloudtest.OwnerCred(t, c), opts: cloudtest.ARMOptions(c)}
	return e
}

func (e env) group(t *testing.T, name string) {
	t.Helper()
	cloudtest.CreateGroup(t, e.c, e.cred, e.opts, "westeurope", name)
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// page is the first page of a pager.
func page[T any](t *testing.T, p *runtime.Pager[T]) T {
	t.Helper()
	v, err := p.NextPage(t.Context())
	ok(t, err)
	return v
}

func (e env) serviceBus(t *testing.T, cred azcore.TokenCredential, opts *azarm.ClientOptions) (*armservicebus.NamespacesClient, *armservicebus.QueuesClient) {
	t.Helper()
	ns, err := armservicebus.NewNamespacesClient(e.sub, cred, opts)
	ok(t, err)
	q, err := armservicebus.NewQueuesClient(e.sub, cred, opts)
	ok(t, err)
	return ns, q
}

func createNamespace(t *testing.T, ns *armservicebus.NamespacesClient, rg, name string) (armservicebus.SBNamespace, error) {
	t.Helper()
	pl, err := ns.BeginCreateOrUpdate(t.Context(), rg, name, armservicebus.SBNamespace{
		Location: new("West Europe"), Tags: map[string]*string{"team": new("a")},
		SKU: &armservicebus.SBSKU{Name: new(armservicebus.SKUNameStandard), Tier: new(armservicebus.SKUTierStandard)},
	}, nil)
	if err != nil {
		return armservicebus.SBNamespace{}, err
	}
	res, err := pl.PollUntilDone(t.Context(), poll)
	return res.SBNamespace, err
}

// TestServiceBus creates a namespace (a long-running operation), a queue and a queue rule with
// the real armservicebus client; reads the keys, regenerates one, patches the namespace, lists,
// and deletes the namespace with everything under it.
func TestServiceBus(t *testing.T) {
	e := start(t, "")
	e.group(t, "rg")
	ns, queues := e.serviceBus(t, e.cred, e.opts)
	ctx := t.Context()

	created, err := createNamespace(t, ns, "rg", "sb-cerulean")
	ok(t, err)
	p := created.Properties
	if *p.ProvisioningState != "Succeeded" || *p.ServiceBusEndpoint != "https://sb-cerulean.servicebus.windows.net:443/" ||
		*created.Location != "westeurope" || *created.SKU.Name != armservicebus.SKUNameStandard || *created.Tags["team"] != "a" {
		t.Fatalf("created: %+v %+v", created, p)
	}

	q, err := queues.CreateOrUpdate(ctx, "rg", "sb-cerulean", "orders", armservicebus.SBQueue{
		Properties: &armservicebus.SBQueueProperties{MaxSizeInMegabytes: new(int32(2048)), RequiresSession: new(true)},
	}, nil)
	ok(t, err)
	if *q.Name != "orders" || *q.Properties.MaxSizeInMegabytes != 2048 || !*q.Properties.RequiresSession {
		t.Fatalf("queue: %+v", q.Properties)
	}
	got, err := queues.Get(ctx, "rg", "sb-cerulean", "orders", nil)
	ok(t, err)
	if *got.ID != "/subscriptions/"+e.sub+"/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/sb-cerulean/queues/orders" || *got.Properties.MaxSizeInMegabytes != 2048 {
		t.Fatalf("get queue: %s %+v", *got.ID, got.Properties)
	}
	if v := page(t, queues.NewListByNamespacePager("rg", "sb-cerulean", nil)).Value; len(v) != 1 {
		t.Fatalf("%d queues listed, want 1", len(v))
	}

	// The namespace's default rule, with keys that stay the same until regenerated.
	k1, err := ns.ListKeys(ctx, "rg", "sb-cerulean", "RootManageSharedAccessKey", nil)
	ok(t, err)
	k2, err := ns.ListKeys(ctx, "rg", "sb-cerulean", "RootManageSharedAccessKey", nil)
	ok(t, err)
	if *k1.PrimaryKey == "" || *k1.PrimaryKey == *k1.SecondaryKey || *k1.PrimaryKey != *k2.PrimaryKey || *k1.KeyName != "RootManageSharedAccessKey" ||
		*k1.PrimaryConnectionString != "Endpoint=sb://sb-cerulean.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+*k1.PrimaryKey {
		t.Fatalf("keys: %+v / %+v", k1, k2)
	}
	regen, err := ns.RegenerateKeys(ctx, "rg", "sb-cerulean", "RootManageSharedAccessKey",
		armservicebus.RegenerateAccessKeyParameters{KeyType: new(armservicebus.KeyTypePrimaryKey)}, nil)
	ok(t, err)
	k3, err := ns.ListKeys(ctx, "rg", "sb-cerulean", "RootManageSharedAccessKey", nil)
	ok(t, err)
	if *regen.PrimaryKey == *k1.PrimaryKey || *regen.SecondaryKey != *k1.SecondaryKey || *k3.PrimaryKey != *regen.PrimaryKey {
		t.Fatalf("regenerate: before %s/%s, answer %s/%s, after %s", *k1.PrimaryKey, *k1.SecondaryKey, *regen.PrimaryKey, *regen.SecondaryKey, *k3.PrimaryKey)
	}

	// A queue's own rule: its connection string names the queue.
	if _, err := queues.CreateOrUpdateAuthorizationRule(ctx, "rg", "sb-cerulean", "orders", "send", armservicebus.SBAuthorizationRule{
		Properties: &armservicebus.SBAuthorizationRuleProperties{Rights: []*armservicebus.AccessRights{new(armservicebus.AccessRightsSend)}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	qk, err := queues.ListKeys(ctx, "rg", "sb-cerulean", "orders", "send", nil)
	ok(t, err)
	if !strings.HasSuffix(*qk.PrimaryConnectionString, ";SharedAccessKeyName=send;SharedAccessKey="+*qk.PrimaryKey+";EntityPath=orders") || *qk.PrimaryKey == *k3.PrimaryKey {
		t.Fatalf("queue rule keys: %+v", qk)
	}

	// PATCH merges: the sku stays, the tags are replaced.
	upd, err := ns.Update(ctx, "rg", "sb-cerulean", armservicebus.SBNamespaceUpdateParameters{Tags: map[string]*string{"team": new("b")}}, nil)
	ok(t, err)
	if *upd.Tags["team"] != "b" || upd.SKU == nil || *upd.SKU.Name != armservicebus.SKUNameStandard {
		t.Fatalf("update: %+v", upd)
	}
	if v := page(t, ns.NewListByResourceGroupPager("rg", nil)).Value; len(v) != 1 || *v[0].Tags["team"] != "b" {
		t.Fatalf("list by group: %+v", v)
	}
	if v := page(t, ns.NewListPager(nil)).Value; len(v) != 1 {
		t.Fatalf("list by subscription: %d namespaces", len(v))
	}

	// A child under a missing parent, and the delete that takes the children along.
	_, err = queues.CreateOrUpdate(ctx, "rg", "sb-missing", "orders", armservicebus.SBQueue{}, nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ParentResourceNotFound")
	pl, err := ns.BeginDelete(ctx, "rg", "sb-cerulean", nil)
	ok(t, err)
	if _, err := pl.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	_, err = queues.Get(ctx, "rg", "sb-cerulean", "orders", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
	_, err = ns.ListKeys(ctx, "rg", "sb-cerulean", "RootManageSharedAccessKey", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
}

func TestEventHubs(t *testing.T) {
	e := start(t, "")
	e.group(t, "rg")
	ctx := t.Context()
	ns, err := armeventhub.NewNamespacesClient(e.sub, e.cred, e.opts)
	ok(t, err)
	hubs, err := armeventhub.NewEventHubsClient(e.sub, e.cred, e.opts)
	ok(t, err)
	pl, err := ns.BeginCreateOrUpdate(ctx, "rg", "eh-cerulean", armeventhub.EHNamespace{
		Location: new("westeurope"), SKU: &armeventhub.SKU{Name: new(armeventhub.SKUNameStandard)},
	}, nil)
	ok(t, err)
	created, err := pl.PollUntilDone(ctx, poll)
	ok(t, err)
	if *created.Properties.ProvisioningState != "Succeeded" || *created.Properties.ServiceBusEndpoint != "https://eh-cerulean.servicebus.windows.net:443/" {
		t.Fatalf("created: %+v", created.Properties)
	}
	hub, err := hubs.CreateOrUpdate(ctx, "rg", "eh-cerulean", "events", armeventhub.Eventhub{
		Properties: &armeventhub.Properties{PartitionCount: new(int64(4))},
	}, nil)
	ok(t, err)
	if *hub.Properties.PartitionCount != 4 {
		t.Fatalf("event hub: %+v", hub.Properties)
	}
	keys, err := ns.ListKeys(ctx, "rg", "eh-cerulean", "RootManageSharedAccessKey", nil)
	ok(t, err)
	if !strings.HasPrefix(*keys.PrimaryConnectionString, "Endpoint=sb://eh-cerulean.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=") {
		t.Fatalf("keys: %+v", keys)
	}
}

func TestCosmosDB(t *testing.T) {
	e := start(t, "")
	e.group(t, "rg")
	ctx := t.Context()
	accts, err := armcosmos.NewDatabaseAccountsClient(e.sub, e.cred, e.opts)
	ok(t, err)
	sql, err := armcosmos.NewSQLResourcesClient(e.sub, e.cred, e.opts)
	ok(t, err)
	pl, err := accts.BeginCreateOrUpdate(ctx, "rg", "cosmos-cerulean", armcosmos.DatabaseAccountCreateUpdateParameters{
		Location: new("westeurope"), Kind: new(armcosmos.DatabaseAccountKindGlobalDocumentDB),
		Properties: &armcosmos.DatabaseAccountCreateUpdateProperties{
			DatabaseAccountOfferType: new("Standard"),
			Locations:                []*armcosmos.Location{{LocationName: new("westeurope"), FailoverPriority: new(int32(0))}},
		},
	}, nil)
	ok(t, err)
	acct, err := pl.PollUntilDone(ctx, poll)
	ok(t, err)
	if *acct.Properties.ProvisioningState != "Succeeded" || *acct.Properties.DocumentEndpoint != "https://cosmos-cerulean.documents.azure.com:443/" || *acct.Kind != armcosmos.DatabaseAccountKindGlobalDocumentDB {
		t.Fatalf("account: %+v", acct.Properties)
	}
	k1, err := accts.ListKeys(ctx, "rg", "cosmos-cerulean", nil)
	ok(t, err)
	cs, err := accts.ListConnectionStrings(ctx, "rg", "cosmos-cerulean", nil)
	ok(t, err)
	if len(*k1.PrimaryMasterKey) != 88 || *k1.PrimaryMasterKey == *k1.SecondaryMasterKey || len(cs.ConnectionStrings) != 4 ||
		*cs.ConnectionStrings[0].ConnectionString != "AccountEndpoint=https://cosmos-cerulean.documents.azure.com:443/;AccountKey="+*k1.PrimaryMasterKey+";" {
		t.Fatalf("keys %+v, connection strings %+v", k1, cs.ConnectionStrings)
	}
	rp, err := accts.BeginRegenerateKey(ctx, "rg", "cosmos-cerulean", armcosmos.DatabaseAccountRegenerateKeyParameters{KeyKind: new(armcosmos.KeyKindPrimary)}, nil)
	ok(t, err)
	if _, err := rp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	k2, err := accts.ListKeys(ctx, "rg", "cosmos-cerulean", nil)
	ok(t, err)
	if *k2.PrimaryMasterKey == *k1.PrimaryMasterKey || *k2.SecondaryMasterKey != *k1.SecondaryMasterKey || *k2.PrimaryReadonlyMasterKey != *k1.PrimaryReadonlyMasterKey {
		t.Fatalf("after regenerating primary: %+v, before %+v", k2, k1)
	}
	dp, err := sql.BeginCreateUpdateSQLDatabase(ctx, "rg", "cosmos-cerulean", "app", armcosmos.SQLDatabaseCreateUpdateParameters{
		Properties: &armcosmos.SQLDatabaseCreateUpdateProperties{Resource: &armcosmos.SQLDatabaseResource{ID: new("app")}},
	}, nil)
	ok(t, err)
	db, err := dp.PollUntilDone(ctx, poll)
	ok(t, err)
	if *db.Properties.Resource.ID != "app" {
		t.Fatalf("database: %+v", db.Properties.Resource)
	}
	delp, err := accts.BeginDelete(ctx, "rg", "cosmos-cerulean", nil)
	ok(t, err)
	if _, err := delp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	_, err = sql.GetSQLDatabase(ctx, "rg", "cosmos-cerulean", "app", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
}

func TestVirtualNetwork(t *testing.T) {
	e := start(t, "")
	e.group(t, "rg")
	ctx := t.Context()
	vnets, err := armnetwork.NewVirtualNetworksClient(e.sub, e.cred, e.opts)
	ok(t, err)
	subnets, err := armnetwork.NewSubnetsClient(e.sub, e.cred, e.opts)
	ok(t, err)
	pl, err := vnets.BeginCreateOrUpdate(ctx, "rg", "vnet", armnetwork.VirtualNetwork{
		Location:   new("westeurope"),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{new("10.0.0.0/16")}}},
	}, nil)
	ok(t, err)
	vnet, err := pl.PollUntilDone(ctx, poll)
	ok(t, err)
	if *vnet.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded || *vnet.Properties.AddressSpace.AddressPrefixes[0] != "10.0.0.0/16" || *vnet.Properties.ResourceGUID == "" {
		t.Fatalf("vnet: %+v", vnet.Properties)
	}
	sp, err := subnets.BeginCreateOrUpdate(ctx, "rg", "vnet", "apps", armnetwork.Subnet{
		Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: new("10.0.1.0/24")},
	}, nil)
	ok(t, err)
	sn, err := sp.PollUntilDone(ctx, poll)
	ok(t, err)
	if *sn.Properties.AddressPrefix != "10.0.1.0/24" || *sn.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("subnet: %+v", sn.Properties)
	}
	if v := page(t, subnets.NewListPager("rg", "vnet", nil)).Value; len(v) != 1 || *v[0].Name != "apps" {
		t.Fatalf("subnets: %+v", v)
	}
	dp, err := vnets.BeginDelete(ctx, "rg", "vnet", nil)
	ok(t, err)
	if _, err := dp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	_, err = subnets.Get(ctx, "rg", "vnet", "apps", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "ResourceNotFound")
}

// TestAuthorization: a principal without a role assignment is refused every call, the key
// actions included, with ARM's 403.
func TestAuthorization(t *testing.T) {
	e := start(t, "")
	e.group(t, "rg")
	ns, _ := e.serviceBus(t, e.cred, e.opts)
	if _, err := createNamespace(t, ns, "rg", "sb-owned"); err != nil {
		t.Fatal(err)
	}
	_, cred := cloudtest.NewPrincipal(t, e.c, "no-role")
	other, _ := e.serviceBus(t, cred, e.opts)
	ctx := t.Context()
	_, err := createNamespace(t, other, "rg", "sb-other")
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
	_, err = other.Get(ctx, "rg", "sb-owned", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
	_, err = other.ListKeys(ctx, "rg", "sb-owned", "RootManageSharedAccessKey", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
	_, err = other.RegenerateKeys(ctx, "rg", "sb-owned", "RootManageSharedAccessKey", armservicebus.RegenerateAccessKeyParameters{KeyType: new(armservicebus.KeyTypePrimaryKey)}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")

	// Reader on the group reads the namespace but not its keys (listKeys is an action, not a
	// read); Contributor on the namespace gets the keys.
	reader, readerCred := cloudtest.NewPrincipal(t, e.c, "reader")
	e.grant(t, "/subscriptions/"+e.sub+"/resourceGroups/rg", authz.Reader, reader.ObjectID)
	asReader, _ := e.serviceBus(t, readerCred, e.opts)
	if _, err := asReader.Get(ctx, "rg", "sb-owned", nil); err != nil {
		t.Fatalf("Reader get: %v", err)
	}
	_, err = asReader.ListKeys(ctx, "rg", "sb-owned", "RootManageSharedAccessKey", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
	contrib, contribCred := cloudtest.NewPrincipal(t, e.c, "contributor")
	e.grant(t, "/subscriptions/"+e.sub+"/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/sb-owned", authz.Contributor, contrib.ObjectID)
	asContrib, _ := e.serviceBus(t, contribCred, e.opts)
	if _, err := asContrib.ListKeys(ctx, "rg", "sb-owned", "RootManageSharedAccessKey", nil); err != nil {
		t.Fatalf("Contributor listKeys: %v", err)
	}
	_, err = createNamespace(t, asContrib, "rg", "sb-elsewhere")
	cloudtest.RespErr(t, err, http.StatusForbidden, "AuthorizationFailed")
}

func (e env) grant(t *testing.T, scope, role, principal string) {
	t.Helper()
	ras, err := armauthorization.NewRoleAssignmentsClient(e.sub, e.cred, e.opts)
	ok(t, err)
	_, err = ras.Create(t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: new("/subscriptions/" + e.sub + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
		PrincipalID:      new(principal), PrincipalType: new(armauthorization.PrincipalTypeServicePrincipal),
	}}, nil)
	ok(t, err)
}

// TestBadInput: ARM's errors for versions, types and bodies it cannot take, through the SDK
// where it can send them and through azcore's pipeline where it cannot.
func TestBadInput(t *testing.T) {
	e := start(t, "")
	e.group(t, "rg")
	ctx := t.Context()

	for version, code := range map[string]string{"2099-01-01": "NoRegisteredProviderFound", "banana": "InvalidApiVersionParameter"} {
		opts := *e.opts
		opts.APIVersion = version
		ns, _ := e.serviceBus(t, e.cred, &opts)
		_, err := createNamespace(t, ns, "rg", "sb-version")
		cloudtest.RespErr(t, err, http.StatusBadRequest, code)
		if code == "NoRegisteredProviderFound" && !strings.Contains(err.Error(), "location 'westeurope'") {
			t.Errorf("%s: %v does not name the group's location", version, err)
		}
	}

	client, err := azarm.NewClient("generic.test", "v0.0.0", e.cred, e.opts)
	ok(t, err)
	base := e.c.Settings().URL + "/subscriptions/" + e.sub + "/resourceGroups/rg/providers/"
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown type of a known provider", "PUT", "Microsoft.ServiceBus/widgets/w?api-version=2021-11-01", `{"location":"westeurope"}`, 404, "InvalidResourceType"},
		{"unknown provider", "PUT", "Microsoft.Nope/widgets/w?api-version=2021-11-01", `{"location":"westeurope"}`, 404, "InvalidResourceType"},
		{"body an array", "PUT", "Microsoft.ServiceBus/namespaces/sb-bad?api-version=2021-11-01", `[{"location":"westeurope"}]`, 400, "InvalidRequestContent"},
		{"body a string", "PUT", "Microsoft.ServiceBus/namespaces/sb-bad?api-version=2021-11-01", `"westeurope"`, 400, "InvalidRequestContent"},
		{"body not JSON", "PUT", "Microsoft.ServiceBus/namespaces/sb-bad?api-version=2021-11-01", `{location`, 400, "InvalidRequestContent"},
		{"properties not an object", "PUT", "Microsoft.ServiceBus/namespaces/sb-bad?api-version=2021-11-01", `{"location":"westeurope","properties":[1]}`, 400, "InvalidRequestContent"},
		{"no location", "PUT", "Microsoft.ServiceBus/namespaces/sb-bad?api-version=2021-11-01", `{"sku":{"name":"Standard"}}`, 400, "LocationRequired"},
		{"bad key type", "POST", "Microsoft.ServiceBus/namespaces/sb-bad/authorizationRules/r/regenerateKeys?api-version=2021-11-01", `{"keyType":"ThirdKey"}`, 400, "BadRequest"},
		{"missing namespace", "GET", "Microsoft.ServiceBus/namespaces/sb-bad?api-version=2021-11-01", "", 404, "ResourceNotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := runtime.NewRequest(ctx, tc.method, base+tc.path)
			ok(t, err)
			if tc.body != "" {
				if err := req.SetBody(streaming.NopCloser(strings.NewReader(tc.body)), "application/json"); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := client.Pipeline().Do(req)
			ok(t, err)
			defer func() { _ = resp.Body.Close() }()
			cloudtest.RespErr(t, runtime.NewResponseError(resp), tc.status, tc.code)
		})
	}
	// Nothing of the refused PUTs was stored.
	ns, _ := e.serviceBus(t, e.cred, e.opts)
	if v := page(t, ns.NewListByResourceGroupPager("rg", nil)).Value; len(v) != 0 {
		t.Fatalf("%d namespaces after refused PUTs", len(v))
	}
}

// TestKeysSurviveRestart: the keys are in the cloud's store, so a restart answers the same.
func TestKeysSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir)
	e.group(t, "rg")
	ns, _ := e.serviceBus(t, e.cred, e.opts)
	if _, err := createNamespace(t, ns, "rg", "sb-durable"); err != nil {
		t.Fatal(err)
	}
	before, err := ns.ListKeys(t.Context(), "rg", "sb-durable", "RootManageSharedAccessKey", nil)
	ok(t, err)
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	e = start(t, dir)
	ns, _ = e.serviceBus(t, e.cred, e.opts)
	after, err := ns.ListKeys(t.Context(), "rg", "sb-durable", "RootManageSharedAccessKey", nil)
	ok(t, err)
	if *after.PrimaryKey != *before.PrimaryKey || *after.SecondaryKey != *before.SecondaryKey {
		t.Fatal("keys changed across a restart")
	}
}

// call sends one request through azcore's ARM pipeline (the Owner's token, the cloud's CA) and
// returns the status, headers and decoded body.
func (e env) call(t *testing.T, method, path, body string) (int, http.Header, map[string]any) {
	t.Helper()
	client, err := azarm.NewClient("generic.test", "v0.0.0", e.cred, e.opts)
	ok(t, err)
	req, err := runtime.NewRequest(t.Context(), method, e.c.Settings().URL+strings.ReplaceAll(path, "{sub}", e.sub))
	ok(t, err)
	if body != "" {
		ok(t, req.SetBody(streaming.NopCloser(strings.NewReader(body)), "application/json"))
	}
	resp, err := client.Pipeline().Do(req)
	ok(t, err)
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	if b, _ := runtime.Payload(resp); len(b) > 0 {
		ok(t, json.Unmarshal(b, &out))
	}
	return resp.StatusCode, resp.Header, out
}

func props(b map[string]any) map[string]any {
	p, _ := b["properties"].(map[string]any)
	return p
}

// TestProtocol checks what the SDKs hide: a create is 201 with Azure-AsyncOperation and
// provisioningState Creating, then Succeeded; a GET shows no key material; PATCH merges nested
// properties and removes null ones; the registry's and workspace's POST actions (no SDK module
// for them in go.mod) answer in their providers' shapes; a component reports its
// instrumentation key.
func TestProtocol(t *testing.T) {
	e := start(t, "")
	e.group(t, "rg")
	const acr = "/subscriptions/{sub}/resourceGroups/rg/providers/Microsoft.ContainerRegistry/registries/CeruleanAcr"
	st, h, b := e.call(t, "PUT", acr+"?api-version=2023-07-01", `{"location":"westeurope","sku":{"name":"Basic"},"properties":{"adminUserEnabled":true,"policies":{"quarantinePolicy":{"status":"disabled"},"trustPolicy":{"status":"disabled"}}}}`)
	if st != http.StatusCreated || h.Get("Azure-AsyncOperation") == "" || props(b)["provisioningState"] != "Creating" || props(b)["loginServer"] != "ceruleanacr.azurecr.io" {
		t.Fatalf("create: %d %v %v", st, h, b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, b = e.call(t, "GET", acr+"?api-version=2023-07-01", "")
		if props(b)["provisioningState"] == "Succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never Succeeded: %v", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, found := b["keys"]; found || b["sku"].(map[string]any)["name"] != "Basic" {
		t.Fatalf("GET: %v", b)
	}
	st, _, b = e.call(t, "PATCH", acr+"?api-version=2023-07-01", `{"tags":{"env":"dev"},"properties":{"policies":{"trustPolicy":null,"quarantinePolicy":{"status":"enabled"}}}}`)
	pol, _ := props(b)["policies"].(map[string]any)
	if st != http.StatusOK || b["tags"].(map[string]any)["env"] != "dev" || props(b)["adminUserEnabled"] != true || pol["trustPolicy"] != nil ||
		pol["quarantinePolicy"].(map[string]any)["status"] != "enabled" {
		t.Fatalf("PATCH: %d %v", st, b)
	}
	_, _, c1 := e.call(t, "POST", acr+"/listCredentials?api-version=2023-07-01", "")
	_, _, c2 := e.call(t, "POST", acr+"/regenerateCredential?api-version=2023-07-01", `{"name":"password2"}`)
	p1, p2 := c1["passwords"].([]any), c2["passwords"].([]any)
	if c1["username"] != "CeruleanAcr" || len(p1) != 2 || p1[0].(map[string]any)["value"] != p2[0].(map[string]any)["value"] ||
		p1[1].(map[string]any)["value"] == p2[1].(map[string]any)["value"] {
		t.Fatalf("credentials %v, after regenerating password2 %v", c1, c2)
	}

	const ws = "/subscriptions/{sub}/resourceGroups/rg/providers/Microsoft.OperationalInsights/workspaces/logs"
	if st, _, b := e.call(t, "PUT", ws+"?api-version=2022-10-01", `{"location":"westeurope","properties":{"sku":{"name":"PerGB2018"},"retentionInDays":30}}`); st != http.StatusCreated || props(b)["customerId"] == "" {
		t.Fatalf("workspace: %d %v", st, b)
	}
	_, _, k1 := e.call(t, "POST", ws+"/sharedKeys?api-version=2022-10-01", "")
	_, _, k2 := e.call(t, "POST", ws+"/regenerateSharedKey?api-version=2022-10-01", "")
	if k1["primarySharedKey"] == "" || k1["primarySharedKey"] == k2["primarySharedKey"] {
		t.Fatalf("shared keys %v, regenerated %v", k1, k2)
	}

	const ai = "/subscriptions/{sub}/resourceGroups/rg/providers/Microsoft.Insights/components/app"
	st, _, b = e.call(t, "PUT", ai+"?api-version=2020-02-02", `{"location":"westeurope","kind":"web","properties":{"Application_Type":"web"}}`)
	ik, _ := props(b)["InstrumentationKey"].(string)
	if st != http.StatusOK || b["kind"] != "web" || ik == "" || !strings.HasPrefix(props(b)["ConnectionString"].(string), "InstrumentationKey="+ik+";") {
		t.Fatalf("component: %d %v", st, b)
	}
	if _, _, again := e.call(t, "GET", ai+"?api-version=2020-02-02", ""); props(again)["InstrumentationKey"] != ik {
		t.Fatalf("instrumentation key changed: %v", again)
	}

	// A resource group's type outside a resource group is refused, as ARM refuses it.
	if st, _, b := e.call(t, "GET", "/subscriptions/{sub}/providers/Microsoft.Network/virtualNetworks/vnet?api-version=2024-05-01", ""); st != http.StatusNotFound || b["error"].(map[string]any)["code"] != "InvalidResourceType" {
		t.Fatalf("a network at subscription scope: %d %v", st, b)
	}
}
