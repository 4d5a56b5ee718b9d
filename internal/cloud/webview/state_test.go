package webview_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v5"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/jackc/pgx/v5"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/cloud/webview"
)

// The tree shows what the data planes hold, by name: a vault's secrets with their versions
// (a deleted one marked), a PostgreSQL server's databases, also one an app made with SQL; never
// a value. An identity's page names the scale set that carries it.
func TestTreeShowsDataPlaneStateNeverValues(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := c.Settings()
	owner, opts := cloudtest.OwnerCred(t, c), cloudtest.ARMOptions(c)
	ctx := t.Context()
	cloudtest.CreateGroup(t, c, owner, opts, "local", "data-rg")

	// A vault with two versions of one secret and a deleted one.
	vault := cloudtest.CreateRBACVault(t, c, owner, opts, "local", "data-rg", "dataview")
	cloudtest.AssignRole(t, c, *vault.ID, authz.KeyVaultSecretsOfficer, s.ObjectID)
	sc, err := azsecrets.NewClient(*vault.Properties.VaultURI, owner, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	values := []string{"first-Value-only-the-app-sees", "second-Value-only-the-app-sees", "gone-Value-only-the-app-sees"}
	var versions []string
	for _, v := range values[:2] {
		res, err := sc.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr(v)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, res.ID.Version())
	}
	if _, err := sc.SetSecret(ctx, "old-token", azsecrets.SetSecretParameters{Value: to.Ptr(values[2])}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.DeleteSecret(ctx, "old-token", nil); err != nil {
		t.Fatal(err)
	}

	// A server with a database made through ARM and one an app made with SQL.
	const adminPassword = "Admin-pw-never-shown-1"
	servers, _ := armpostgresqlflexibleservers.NewServersClient(s.SubscriptionID, owner, opts)
	sp, err := servers.BeginCreateOrUpdate(ctx, "data-rg", "pgview", armpostgresqlflexibleservers.Server{
		Location: to.Ptr("local"), SKU: &armpostgresqlflexibleservers.SKU{Name: to.Ptr("Standard_B1ms"), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTierBurstable)},
		Properties: &armpostgresqlflexibleservers.ServerProperties{AdministratorLogin: to.Ptr("appadmin"), AdministratorLoginPassword: to.Ptr(adminPassword)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	dbs, _ := armpostgresqlflexibleservers.NewDatabasesClient(s.SubscriptionID, owner, opts)
	dp, err := dbs.BeginCreate(ctx, "data-rg", "pgview", "orders", armpostgresqlflexibleservers.Database{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rules, _ := armpostgresqlflexibleservers.NewFirewallRulesClient(s.SubscriptionID, owner, opts)
	fp, err := rules.BeginCreateOrUpdate(ctx, "data-rg", "pgview", "local", armpostgresqlflexibleservers.FirewallRule{
		Properties: &armpostgresqlflexibleservers.FirewallRuleProperties{StartIPAddress: to.Ptr("127.0.0.1"), EndIPAddress: to.Ptr("127.0.0.1")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, c, "pgview.postgres.database.azure.com", "appadmin", adminPassword, "CREATE DATABASE made_by_sql")

	// An identity on a scale set.
	mis, _ := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, opts)
	mi, err := mis.CreateOrUpdate(ctx, "data-rg", "node-id", armmsi.Identity{Location: to.Ptr("local")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sets, _ := armcompute.NewVirtualMachineScaleSetsClient(s.SubscriptionID, owner, opts)
	ssp, err := sets.BeginCreateOrUpdate(ctx, "data-rg", "pool", armcompute.VirtualMachineScaleSet{Location: to.Ptr("local"),
		Identity: &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*mi.ID: {}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := ssp.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	get := login(t, c)
	tree, _ := get("/")
	for _, want := range []string{
		"secret db-password, versions: ", versions[0], versions[1],
		"secret old-token, versions: ", "(deleted, recoverable)",
		"database orders", "database made_by_sql", "database postgres",
	} {
		if !strings.Contains(tree, want) {
			t.Errorf("the tree lacks %q", want)
		}
	}
	idPage, _ := get("/identity?clientId=" + *mi.Properties.ClientID)
	if !strings.Contains(idPage, `id="assigned-to"`) || !strings.Contains(idPage, *ss.ID) {
		t.Errorf("the identity's page does not name the scale set %s", *ss.ID)
	}
	for _, secret := range append(values, adminPassword) {
		for name, page := range map[string]string{"tree": tree, "identity": idPage} {
			if strings.Contains(page, secret) {
				t.Errorf("the %s page shows a secret value %q", name, secret)
			}
		}
	}
}

// login logs in with the token file, as the login URL does, and returns a page getter (with
// the live log's X-Last-Seq, when the page has one).
func login(t *testing.T, c *cloud.Cloud) func(path string) (page string, lastSeq uint64) {
	t.Helper()
	s := c.Settings()
	tok, err := os.ReadFile(s.WebViewTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	session := &http.Cookie{Name: "cerulean_view", Value: strings.TrimSpace(string(tok))}
	hc := &http.Client{Transport: c.Transport()}
	return func(path string) (string, uint64) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+webview.Prefix+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(session)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
		}
		last, _ := strconv.ParseUint(res.Header.Get("X-Last-Seq"), 10, 64)
		return string(b), last
	}
}

// sqlExec runs a statement as an app would: the server's public name, sslmode verify-full.
func sqlExec(t *testing.T, c *cloud.Cloud, fqdn, user, password, stmt string) {
	t.Helper()
	ap, ok := c.DataPlaneEndpoint(fqdn)
	if !ok {
		t.Fatalf("%s does not resolve", fqdn)
	}
	pem, err := os.ReadFile(c.Settings().CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s:%d/postgres?sslmode=verify-full", user, password, fqdn, ap.Port()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig.RootCAs = x509.NewCertPool()
	cfg.TLSConfig.RootCAs.AppendCertsFromPEM(pem)
	cfg.LookupFunc = func(_ context.Context, _ string) ([]string, error) { return []string{ap.Addr().String()}, nil }
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), stmt); err != nil {
		t.Fatal(err)
	}
}

// The live log's polls miss no request, however fast they arrive: each poll's rows and the
// sequence number the next poll starts from are read together.
func TestLiveLogMissesNothing(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM(), RequestLogSize: 100000})
	get := login(t, c)
	const total = 20000
	since := c.RequestLog().Last()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			c.RequestLog().Add(reqlog.Entry{Time: time.Now(), Service: "live", Method: http.MethodGet, Path: fmt.Sprintf("/r/%d", i), Status: 200})
		}
	}()
	seen := 0
	poll := func() {
		page, last := get(fmt.Sprintf("/log/rows?service=live&since=%d", since))
		seen += strings.Count(page, "<tr ")
		since = last
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		poll()
	}
	if seen != total {
		t.Fatalf("the live log showed %d of %d requests", seen, total)
	}
}
