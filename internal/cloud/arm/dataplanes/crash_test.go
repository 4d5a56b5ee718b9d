package dataplanes_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v5"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// TestKill9KeepsAcknowledgedWrites: a row committed and a key set before a kill -9 of the cloud
// are there after the next start; the kill leaves no engine process behind.
func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	bin := cloudtest.BuildCeruleanLocal(t)
	dir := t.TempDir()
	p := cloudtest.StartProcess(t, bin, dir)
	co := p.ClientOptions(t)
	opts := &arm.ClientOptions{ClientOptions: co}
	cred := p.OwnerCred(t, co)
	sub := p.Env["AZURE_SUBSCRIPTION_ID"]
	ctx := t.Context()
	groups, _ := armresources.NewResourceGroupsClient(sub, cred, opts)
	if _, err := groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: to.Ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	servers, _ := armpostgresqlflexibleservers.NewServersClient(sub, cred, opts)
	rules, _ := armpostgresqlflexibleservers.NewFirewallRulesClient(sub, cred, opts)
	caches, _ := armredis.NewClient(sub, cred, opts)
	sp, err := servers.BeginCreateOrUpdate(ctx, "rg", "pg-durable", armpostgresqlflexibleservers.Server{
		Location: to.Ptr("eastus"), SKU: &armpostgresqlflexibleservers.SKU{Name: to.Ptr("Standard_B1ms"), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTierBurstable)},
		Properties: &armpostgresqlflexibleservers.ServerProperties{AdministratorLogin: to.Ptr("appadmin"), AdministratorLoginPassword: to.Ptr("Durable-pw-1")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := caches.BeginCreate(ctx, "rg", "cache-durable", armredis.CreateParameters{Location: to.Ptr("eastus"), Properties: &armredis.CreateProperties{
		SKU: &armredis.SKU{Name: to.Ptr(armredis.SKUNameBasic), Family: to.Ptr(armredis.SKUFamilyC), Capacity: to.Ptr[int32](0)},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	fw, err := rules.BeginCreateOrUpdate(ctx, "rg", "pg-durable", "local", armpostgresqlflexibleservers.FirewallRule{
		Properties: &armpostgresqlflexibleservers.FirewallRuleProperties{StartIPAddress: to.Ptr("127.0.0.1"), EndIPAddress: to.Ptr("127.0.0.1")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	keys, err := caches.ListKeys(ctx, "rg", "cache-durable", nil)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(p.Env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	// Where an engine listens is kept in its directory: its own address and the standard port,
	// or 127.0.0.1 and a port of its own when the standard one was taken.
	endpoint := func(kind, name string, std int, portFile string) string {
		read := func(f string) string {
			b, err := os.ReadFile(filepath.Join(dir, "engines", kind, name, f))
			if err != nil {
				return ""
			}
			return strings.TrimSpace(string(b))
		}
		if p := read(portFile); p != "" {
			return "127.0.0.1:" + p
		}
		return read("addr") + ":" + strconv.Itoa(std)
	}
	pgConn := func() (*pgx.Conn, error) {
		ep := endpoint("postgres", "pg-durable", 5432, "port")
		host, port, _ := strings.Cut(ep, ":")
		cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://appadmin:Durable-pw-1@pg-durable.postgres.database.azure.com:%s/postgres?sslmode=verify-full", port))
		if err != nil {
			return nil, err
		}
		cfg.TLSConfig.RootCAs = pool
		cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{host}, nil }
		return pgx.ConnectConfig(ctx, cfg)
	}
	rdb := func() *redis.Client {
		return redis.NewClient(&redis.Options{Addr: endpoint("redis", "cache-durable", 6380, "tls-port"), Password: *keys.PrimaryKey,
			TLSConfig: &tls.Config{RootCAs: pool, ServerName: "cache-durable.redis.cache.windows.net"}})
	}
	conn, err := pgConn()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE acked (v text); INSERT INTO acked VALUES ('before the kill')"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	r := rdb()
	if err := r.Set(ctx, "acked", "before the kill", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	pidFile := filepath.Join(dir, "engines", "postgres", "pg-durable", "data", "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pgPID, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])

	p.Kill(t) // SIGKILL
	// The engines die with the cloud (parent-death signal): nothing is left running.
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pgPID, 0) == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL (pid %d) still runs after kill -9 of the cloud", pgPID)
		}
		time.Sleep(50 * time.Millisecond)
	}

	p2 := cloudtest.StartProcess(t, bin, dir)
	_ = p2
	conn, err = pgConn()
	if err != nil {
		t.Fatal(err)
	}
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM acked").Scan(&v); err != nil || v != "before the kill" {
		t.Fatalf("PostgreSQL after restart: %q %v", v, err)
	}
	_ = conn.Close(ctx)
	r = rdb()
	defer r.Close()
	if got, err := r.Get(ctx, "acked").Result(); err != nil || got != "before the kill" {
		t.Fatalf("Redis after restart: %q %v", got, err)
	}
}
