package dataplanes_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v5"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/engines"
)

type env struct {
	c    *cloud.Cloud
	cred azcore.TokenCredential
	sub  string
	ca   *x509.CertPool
}

// One cloud for the package's tests: engines take seconds to start.
func start(t *testing.T) *env {
	t.Helper()
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	pem, err := os.ReadFile(c.Settings().CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	e := &env{c: c, cred: cloudtest.OwnerCred(t, c), sub: c.Settings().SubscriptionID, ca: pool}
	cloudtest.CreateGroup(t, c, e.cred, cloudtest.ARMOptions(c), "eastus", "rg")
	return e
}

func TestDataPlanes(t *testing.T) {
	e := start(t)
	t.Run("PostgreSQL", func(t *testing.T) { testPostgres(t, e) })
	t.Run("Redis", func(t *testing.T) { testRedis(t, e) })
	t.Run("RedisFirewall", func(t *testing.T) { testRedisFirewall(t, e) })
	t.Run("EngineFailure", func(t *testing.T) { testEngineFailure(t, e) })
	t.Run("FirewallRuleWhileStarting", func(t *testing.T) { testFirewallRuleWhileStarting(t, e) })
	t.Run("RedisFirewallRuleWhileStarting", func(t *testing.T) { testRedisFirewallRuleWhileStarting(t, e) })
}

// testRedisFirewallRuleWhileStarting: a rule put while a new cache starts is enforced once it
// runs. The cache started with the rules read before (none: everyone admitted), and the rule,
// given to no running engine, was in ARM only.
func testRedisFirewallRuleWhileStarting(t *testing.T, e *env) {
	ctx := t.Context()
	caches, _ := armredis.NewClient(e.sub, e.cred, cloudtest.ARMOptions(e.c))
	rules, _ := armredis.NewFirewallRulesClient(e.sub, e.cred, cloudtest.ARMOptions(e.c))
	poller, err := caches.BeginCreate(ctx, "rg", "cache-early-rule", armredis.CreateParameters{Location: to.Ptr("eastus"), Properties: &armredis.CreateProperties{
		SKU: &armredis.SKU{Name: to.Ptr(armredis.SKUNameBasic), Family: to.Ptr(armredis.SKUFamilyC), Capacity: to.Ptr[int32](0)},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = retryForAMinute(5*time.Millisecond, func() error { // refused until the cache exists in ARM
		_, err := rules.CreateOrUpdate(ctx, "rg", "cache-early-rule", "office", armredis.FirewallRule{
			Properties: &armredis.FirewallRuleProperties{StartIP: to.Ptr("10.9.0.0"), EndIP: to.Ptr("10.9.0.255")}}, nil)
		return err
	})
	if err != nil {
		t.Fatalf("the rule was refused for a minute: %v", err)
	}
	if _, err := poller.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	keys, err := caches.ListKeys(ctx, "rg", "cache-early-rule", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e.redisClient("cache-early-rule", *keys.PrimaryKey)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a client outside the cache's only rule, put while it started, connects")
	}
}

// testFirewallRuleWhileStarting: a firewall rule put as soon as ARM takes it, while the new
// server's engine is still starting (what an app's manifests do), is enforced once the server
// runs: ARM and the engine agree. The start used to write the rules it had read before the
// rule came, and the rule stayed in ARM only.
func testFirewallRuleWhileStarting(t *testing.T, e *env) {
	ctx := t.Context()
	opts := cloudtest.ARMOptions(e.c)
	servers, _ := armpostgresqlflexibleservers.NewServersClient(e.sub, e.cred, opts)
	rules, _ := armpostgresqlflexibleservers.NewFirewallRulesClient(e.sub, e.cred, opts)
	poller, err := servers.BeginCreateOrUpdate(ctx, "rg", "pg-early-rule", armpostgresqlflexibleservers.Server{
		Location: to.Ptr("eastus"), SKU: &armpostgresqlflexibleservers.SKU{Name: to.Ptr("Standard_B1ms"), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTierBurstable)},
		Properties: &armpostgresqlflexibleservers.ServerProperties{AdministratorLogin: to.Ptr("appadmin"), AdministratorLoginPassword: to.Ptr("Early-pw-123")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rule := armpostgresqlflexibleservers.FirewallRule{Properties: &armpostgresqlflexibleservers.FirewallRuleProperties{
		StartIPAddress: to.Ptr("127.0.0.0"), EndIPAddress: to.Ptr("127.255.255.255")}}
	err = retryForAMinute(20*time.Millisecond, func() error { // refused until the server exists in ARM
		_, err := rules.BeginCreateOrUpdate(ctx, "rg", "pg-early-rule", "loopback", rule, nil)
		return err
	})
	if err != nil {
		t.Fatalf("the rule was refused for a minute: %v", err)
	}
	if _, err := poller.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	err = retryForAMinute(100*time.Millisecond, func() error {
		conn, err := e.pgConnect(ctx, "pg-early-rule.postgres.database.azure.com", "appadmin", "Early-pw-123", "postgres")
		if err == nil {
			_ = conn.Close(ctx)
		}
		return err
	})
	if err != nil {
		t.Fatalf("a client inside the rule put while the server started is refused: %v", err)
	}
}

// retryForAMinute calls try every pause until it succeeds or a minute has passed, and returns
// its last error.
func retryForAMinute(pause time.Duration, try func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := try()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
	}
}

// testEngineFailure: a server whose engine cannot start is Failed with the engine's error,
// never a half-created server that reports success.
func testEngineFailure(t *testing.T, e *env) {
	ctx := t.Context()
	saved := engines.PostgresBin
	engines.PostgresBin = t.TempDir() // no initdb, no postgres
	defer func() { engines.PostgresBin = saved }()
	servers, _ := armpostgresqlflexibleservers.NewServersClient(e.sub, e.cred, cloudtest.ARMOptions(e.c))
	poller, err := servers.BeginCreateOrUpdate(ctx, "rg", "pg-broken", armpostgresqlflexibleservers.Server{
		Location: to.Ptr("eastus"), SKU: &armpostgresqlflexibleservers.SKU{Name: to.Ptr("Standard_B1ms"), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTierBurstable)},
		Properties: &armpostgresqlflexibleservers.ServerProperties{AdministratorLogin: to.Ptr("appadmin"), AdministratorLoginPassword: to.Ptr("Broken-pw-1")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = poller.PollUntilDone(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "initdb") {
		t.Fatalf("create with a broken engine: %v", err)
	}
	got, err := servers.Get(ctx, "rg", "pg-broken", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *got.Properties.State == armpostgresqlflexibleservers.ServerStateReady {
		t.Fatal("a server whose engine failed reports Ready")
	}
	if _, ok := e.c.LookupDataPlane("pg-broken.postgres.database.azure.com"); ok {
		t.Fatal("a failed server resolves")
	}
}

// pgConnect connects as an app would: a DSN with the server's public name and sslmode
// verify-full, the cloud's CA as the only non-default; the name is dialled at the address the
// cloud's DNS answers for it.
func (e *env) pgConnect(ctx context.Context, fqdn, user, pw, db string) (*pgx.Conn, error) {
	ap, ok := e.c.DataPlaneEndpoint(fqdn)
	if !ok {
		return nil, fmt.Errorf("%s does not resolve", fqdn)
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=verify-full", user, pw, fqdn, ap.Port(), db))
	if err != nil {
		return nil, err
	}
	cfg.TLSConfig.RootCAs = e.ca
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{ap.Addr().String()}, nil }
	return pgx.ConnectConfig(ctx, cfg)
}

func testPostgres(t *testing.T, e *env) {
	ctx := t.Context()
	opts := cloudtest.ARMOptions(e.c)
	servers, err := armpostgresqlflexibleservers.NewServersClient(e.sub, e.cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	dbs, _ := armpostgresqlflexibleservers.NewDatabasesClient(e.sub, e.cred, opts)
	rules, _ := armpostgresqlflexibleservers.NewFirewallRulesClient(e.sub, e.cred, opts)
	configs, _ := armpostgresqlflexibleservers.NewConfigurationsClient(e.sub, e.cred, opts)
	server := func(version, skuName string) armpostgresqlflexibleservers.Server {
		return armpostgresqlflexibleservers.Server{
			Location: to.Ptr("eastus"),
			SKU:      &armpostgresqlflexibleservers.SKU{Name: to.Ptr(skuName), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTierBurstable)},
			Properties: &armpostgresqlflexibleservers.ServerProperties{
				AdministratorLogin: to.Ptr("appadmin"), AdministratorLoginPassword: to.Ptr("First-pw-123"),
				Version: to.Ptr(armpostgresqlflexibleservers.PostgresMajorVersion(version)),
			},
		}
	}
	poller, err := servers.BeginCreateOrUpdate(ctx, "rg", "pg-app", server("16", "Standard_B1ms"), nil)
	if err != nil {
		t.Fatal(err)
	}
	created, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := created.Properties
	if *p.FullyQualifiedDomainName != "pg-app.postgres.database.azure.com" || *p.State != armpostgresqlflexibleservers.ServerStateReady {
		t.Fatalf("server: fqdn %s, state %s", *p.FullyQualifiedDomainName, *p.State)
	}
	if p.AdministratorLoginPassword != nil {
		t.Fatal("the password is shown")
	}

	// Bad input: ARM 400s and 409 in Azure's shape.
	_, err = servers.BeginCreateOrUpdate(ctx, "rg", "pg-bad", server("9", "Standard_B1ms"), nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "InvalidParameterValue")
	_, err = servers.BeginCreateOrUpdate(ctx, "rg", "pg-bad", server("16", "Huge_X1"), nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "InvalidSkuName")
	_, err = servers.BeginCreateOrUpdate(ctx, "rg", "Pg_Bad", server("16", "Standard_B1ms"), nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "InvalidResourceName")
	cloudtest.CreateGroup(t, e.c, e.cred, opts, "eastus", "rg2")
	_, err = servers.BeginCreateOrUpdate(ctx, "rg2", "pg-app", server("16", "Standard_B1ms"), nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "ServerNameAlreadyExists")

	fqdn := *p.FullyQualifiedDomainName
	// No firewall rule yet: refused as Azure refuses.
	if _, err := e.pgConnect(ctx, fqdn, "appadmin", "First-pw-123", "postgres"); err == nil || !strings.Contains(err.Error(), "no pg_hba.conf entry for host") {
		t.Fatalf("client outside every rule: %v", err)
	}
	fwp, err := rules.BeginCreateOrUpdate(ctx, "rg", "pg-app", "local", armpostgresqlflexibleservers.FirewallRule{
		Properties: &armpostgresqlflexibleservers.FirewallRuleProperties{StartIPAddress: to.Ptr("127.0.0.1"), EndIPAddress: to.Ptr("127.0.0.1")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fwp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	dbp, err := dbs.BeginCreate(ctx, "rg", "pg-app", "orders", armpostgresqlflexibleservers.Database{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := e.pgConnect(ctx, fqdn, "appadmin", "First-pw-123", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE o (id int); INSERT INTO o VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if _, err := e.pgConnect(ctx, fqdn, "appadmin", "wrong-password", "orders"); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("wrong password: %v", err)
	}

	// A PATCH of the password changes it.
	up, err := servers.BeginUpdate(ctx, "rg", "pg-app", armpostgresqlflexibleservers.ServerForPatch{
		Properties: &armpostgresqlflexibleservers.ServerPropertiesForPatch{AdministratorLoginPassword: to.Ptr("Second-pw-456")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pgConnect(ctx, fqdn, "appadmin", "First-pw-123", "orders"); err == nil {
		t.Fatal("the old password still works")
	}
	conn, err = e.pgConnect(ctx, fqdn, "appadmin", "Second-pw-456", "orders")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	// Configurations are the server's own parameters.
	cp, err := configs.BeginPut(ctx, "rg", "pg-app", "work_mem", armpostgresqlflexibleservers.ConfigurationForUpdate{
		Properties: &armpostgresqlflexibleservers.ConfigurationProperties{Value: to.Ptr("8192"), Source: to.Ptr("user-override")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.PollUntilDone(ctx, nil)
	if err != nil || *cfg.Properties.Value != "8192" {
		t.Fatalf("work_mem: %v %v", cfg, err)
	}
	// Azure's id and source: a parameter someone set is user-override, the others system-default.
	if !strings.HasSuffix(*cfg.ID, "/flexibleServers/pg-app/configurations/work_mem") || *cfg.Properties.Source != "user-override" {
		t.Errorf("work_mem: id %s, source %s", *cfg.ID, *cfg.Properties.Source)
	}
	if other, err := configs.Get(ctx, "rg", "pg-app", "DateStyle", nil); err != nil || *other.Properties.Source != "system-default" {
		t.Errorf("DateStyle: %v %v", other, err)
	}

	// Dropping the database drops it in the engine.
	dd, err := dbs.BeginDelete(ctx, "rg", "pg-app", "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dd.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pgConnect(ctx, fqdn, "appadmin", "Second-pw-456", "orders"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("dropped database: %v", err)
	}

	// Stop and start.
	sp, err := servers.BeginStop(ctx, "rg", "pg-app", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := servers.Get(ctx, "rg", "pg-app", nil)
	if *got.Properties.State != armpostgresqlflexibleservers.ServerStateStopped {
		t.Fatalf("after stop: %s", *got.Properties.State)
	}
	if _, ok := e.c.LookupDataPlane(fqdn); ok {
		t.Fatal("a stopped server still resolves")
	}
	st, err := servers.BeginStart(ctx, "rg", "pg-app", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	conn, err = e.pgConnect(ctx, fqdn, "appadmin", "Second-pw-456", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	// Delete: the name stops resolving.
	del, err := servers.BeginDelete(ctx, "rg", "pg-app", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := del.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.c.LookupDataPlane(fqdn); ok {
		t.Fatal("a deleted server still resolves")
	}
}

func (e *env) redisClient(name, key string) *redis.Client {
	host := name + ".redis.cache.windows.net"
	ap, _ := e.c.DataPlaneEndpoint(host)
	return redis.NewClient(&redis.Options{Addr: ap.String(), Password: key,
		TLSConfig: &tls.Config{RootCAs: e.ca, ServerName: host}})
}

func testRedis(t *testing.T, e *env) {
	ctx := t.Context()
	caches, err := armredis.NewClient(e.sub, e.cred, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	params := func(skuName armredis.SKUName, fam armredis.SKUFamily) armredis.CreateParameters {
		return armredis.CreateParameters{Location: to.Ptr("eastus"), Properties: &armredis.CreateProperties{
			SKU: &armredis.SKU{Name: to.Ptr(skuName), Family: to.Ptr(fam), Capacity: to.Ptr[int32](0)},
		}}
	}
	_, err = caches.BeginCreate(ctx, "rg", "cache-bad", params("Huge", armredis.SKUFamilyC), nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "InvalidRequestBody")
	poller, err := caches.BeginCreate(ctx, "rg", "cache-app", params(armredis.SKUNameBasic, armredis.SKUFamilyC), nil)
	if err != nil {
		t.Fatal(err)
	}
	created, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := created.Properties
	if *p.HostName != "cache-app.redis.cache.windows.net" || *p.SSLPort != 6380 || *p.Port != 6379 || *p.ProvisioningState != armredis.ProvisioningStateSucceeded {
		t.Fatalf("cache: %s %d %d %s", *p.HostName, *p.SSLPort, *p.Port, *p.ProvisioningState)
	}
	_, err = caches.BeginCreate(ctx, "rg2", "cache-app", params(armredis.SKUNameBasic, armredis.SKUFamilyC), nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "NameNotAvailable")

	keys, err := caches.ListKeys(ctx, "rg", "cache-app", nil)
	if err != nil {
		t.Fatal(err)
	}
	primary := e.redisClient("cache-app", *keys.PrimaryKey)
	defer primary.Close()
	secondary := e.redisClient("cache-app", *keys.SecondaryKey)
	defer secondary.Close()
	if err := primary.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := secondary.Get(ctx, "greeting").Result(); err != nil || v != "hello" {
		t.Fatalf("with the secondary key: %q %v", v, err)
	}
	wrong := e.redisClient("cache-app", "not-a-key")
	defer wrong.Close()
	if err := wrong.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong key: %v", err)
	}
	if _, ok := e.c.RedisPlainEndpoint("cache-app"); ok {
		t.Fatal("the non-TLS port is open without enableNonSslPort")
	}

	// Regenerating the secondary key cuts it only.
	regen, err := caches.RegenerateKey(ctx, "rg", "cache-app", armredis.RegenerateKeyParameters{KeyType: to.Ptr(armredis.RedisKeyTypeSecondary)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *regen.PrimaryKey != *keys.PrimaryKey || *regen.SecondaryKey == *keys.SecondaryKey {
		t.Fatal("regenerateKey changed the wrong key")
	}
	stale := e.redisClient("cache-app", *keys.SecondaryKey)
	defer stale.Close()
	var rerr redis.Error
	if err := stale.Ping(ctx).Err(); !errors.As(err, &rerr) {
		t.Fatalf("the regenerated key still works: %v", err)
	}
	if err := primary.Ping(ctx).Err(); err != nil {
		t.Fatalf("the other key stopped working: %v", err)
	}
	fresh := e.redisClient("cache-app", *regen.SecondaryKey)
	defer fresh.Close()
	if err := fresh.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	del, err := caches.BeginDelete(ctx, "rg", "cache-app", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := del.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.c.LookupDataPlane("cache-app.redis.cache.windows.net"); ok {
		t.Fatal("a deleted cache still resolves")
	}
}

// testRedisFirewall: a cache with no firewall rule admits every client; with rules, only clients
// whose address is in a rule's range (this test's client connects from 127.0.0.1); a rule's
// change judges the next connection, without a restart of the cache.
func testRedisFirewall(t *testing.T, e *env) {
	ctx := t.Context()
	caches, err := armredis.NewClient(e.sub, e.cred, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := armredis.NewFirewallRulesClient(e.sub, e.cred, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	poller, err := caches.BeginCreate(ctx, "rg", "cache-fw", armredis.CreateParameters{Location: to.Ptr("eastus"), Properties: &armredis.CreateProperties{
		SKU: &armredis.SKU{Name: to.Ptr(armredis.SKUNameBasic), Family: to.Ptr(armredis.SKUFamilyC), Capacity: to.Ptr[int32](0)},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	keys, err := caches.ListKeys(ctx, "rg", "cache-fw", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A new client per step: go-redis keeps its connections, and rules judge new ones.
	connect := func() (string, error) {
		c := e.redisClient("cache-fw", *keys.PrimaryKey)
		defer c.Close()
		info, err := c.Info(ctx, "server").Result()
		for line := range strings.SplitSeq(info, "\r\n") {
			if pid, ok := strings.CutPrefix(line, "process_id:"); ok {
				return pid, err
			}
		}
		return "", err
	}
	pid, err := connect()
	if err != nil || pid == "" {
		t.Fatalf("no rule: every client connects: %q %v", pid, err)
	}
	setRule := func(start, end string) {
		t.Helper()
		if _, err := rules.CreateOrUpdate(ctx, "rg", "cache-fw", "office", armredis.FirewallRule{
			Properties: &armredis.FirewallRuleProperties{StartIP: to.Ptr(start), EndIP: to.Ptr(end)},
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	setRule("10.9.0.0", "10.9.0.255")
	_, err = connect()
	var rerr redis.Error
	if err == nil || errors.As(err, &rerr) || !strings.Contains(err.Error(), "connection reset by peer") {
		t.Fatalf("a client outside every rule: %v", err)
	}
	setRule("10.9.0.0", "127.0.0.1")
	if got, err := connect(); err != nil || got != pid {
		t.Fatalf("the rule widened to the client: %q %v (process %s before)", got, err, pid)
	}
	if _, err := rules.Delete(ctx, "rg", "cache-fw", "office", nil); err != nil {
		t.Fatal(err)
	}
	setRule("10.9.0.0", "10.9.0.255")
	if _, err := rules.Delete(ctx, "rg", "cache-fw", "office", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := connect(); err != nil || got != pid {
		t.Fatalf("the rules deleted: %q %v (process %s before)", got, err, pid)
	}
	del, err := caches.BeginDelete(ctx, "rg", "cache-fw", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := del.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
}
