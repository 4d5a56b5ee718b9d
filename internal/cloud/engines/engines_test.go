package engines_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/cerulean/cerulean/internal/cloud/engines"
	"github.com/cerulean/cerulean/internal/pki"
)

func newSupervisor(t *testing.T, dir string) (*engines.Supervisor, *pki.CA) {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(dir+"/ca.pem", dir+"/ca-key.pem", pkix.Name{CommonName: "test CA"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := engines.New(engines.Options{Dir: dir, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, ca
}

func pgConnect(ctx context.Context, ca *pki.CA, server string, addr netip.AddrPort, user, pw, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=verify-full",
		engines.PostgresHost(server), addr.Port(), user, pw, db))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg.TLSConfig.RootCAs = pool
	// The name resolves through the cloud's DNS for pods; here the test dials the address.
	cfg.Host = addr.Addr().String()
	cfg.TLSConfig.ServerName = engines.PostgresHost(server)
	cfg.Fallbacks = nil
	return pgx.ConnectConfig(ctx, cfg)
}

func TestPostgresServer(t *testing.T) {
	dir := t.TempDir()
	s, ca := newSupervisor(t, dir)
	ctx := t.Context()
	lo := netip.MustParseAddr("127.0.0.1")
	srv := engines.PostgresServer{Name: "pg1", Login: "azureuser", Password: "S3cret-pw!", Firewall: []engines.IPRange{{Start: lo, End: lo}}}
	addr, err := s.StartPostgres(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgConnect(ctx, ca, "pg1", addr, "azureuser", "S3cret-pw!", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	_ = c.Close(ctx)

	// A wrong password is PostgreSQL's own refusal.
	if _, err := pgConnect(ctx, ca, "pg1", addr, "azureuser", "wrong", "postgres"); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("wrong password: %v", err)
	}
	// A database the cloud creates is there; the new password works, the old one not.
	if err := s.CreateDatabase(ctx, "pg1", "azureuser", "app", "", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPostgresPassword(ctx, "pg1", "azureuser", "N3w-pw'x"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgConnect(ctx, ca, "pg1", addr, "azureuser", "S3cret-pw!", "app"); err == nil {
		t.Fatal("old password still accepted")
	}
	c, err = pgConnect(ctx, ca, "pg1", addr, "azureuser", "N3w-pw'x", "app")
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close(ctx)
	// Outside every firewall rule: refused as Azure refuses.
	if err := s.SetPostgresFirewall(ctx, "pg1", []engines.IPRange{{Start: netip.MustParseAddr("10.0.0.1"), End: netip.MustParseAddr("10.0.0.9")}}); err != nil {
		t.Fatal(err)
	}
	_, err = pgConnect(ctx, ca, "pg1", addr, "azureuser", "N3w-pw'x", "postgres")
	if err == nil || !strings.Contains(err.Error(), `no pg_hba.conf entry for host "127.0.0.1", user "azureuser", database "postgres", SSL encryption`) {
		t.Fatalf("firewalled client: %v", err)
	}
	// A restart keeps the data.
	if err := s.StopPostgres("pg1"); err != nil {
		t.Fatal(err)
	}
	srv.Firewall = []engines.IPRange{{Start: lo, End: lo}}
	if addr, err = s.StartPostgres(ctx, srv); err != nil {
		t.Fatal(err)
	}
	c, err = pgConnect(ctx, ca, "pg1", addr, "azureuser", "N3w-pw'x", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := c.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: %d, %v", v, err)
	}
	_ = c.Close(ctx)
	if err := s.RemovePostgres("pg1"); err != nil {
		t.Fatal(err)
	}
}

func redisClient(ca *pki.CA, name string, addr netip.AddrPort, key string) *redis.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return redis.NewClient(&redis.Options{Addr: addr.String(), Password: key,
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: engines.RedisHost(name)}})
}

func TestRedisCache(t *testing.T) {
	dir := t.TempDir()
	s, ca := newSupervisor(t, dir)
	ctx := t.Context()
	keys := [2]string{"key-one-AAAA", "key-two-BBBB"}
	addrs, err := s.StartRedis(ctx, engines.RedisCache{Name: "cache1", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if addrs.Plain.IsValid() {
		t.Fatal("non-TLS port open without enableNonSslPort")
	}
	c1 := redisClient(ca, "cache1", addrs.TLS, keys[0])
	defer c1.Close()
	c2 := redisClient(ca, "cache1", addrs.TLS, keys[1])
	defer c2.Close()
	if err := c1.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c2.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("second key: %q %v", v, err)
	}
	bad := redisClient(ca, "cache1", addrs.TLS, "nope")
	defer bad.Close()
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong key: %v", err)
	}
	// Regenerating the second key cuts it only.
	newKeys := [2]string{keys[0], "key-two-CCCC"}
	if err := s.SetRedisKeys(ctx, "cache1", keys[0], newKeys); err != nil {
		t.Fatal(err)
	}
	old := redisClient(ca, "cache1", addrs.TLS, keys[1])
	defer old.Close()
	var rerr redis.Error
	if err := old.Ping(ctx).Err(); !errors.As(err, &rerr) {
		t.Fatalf("regenerated key still works: %v", err)
	}
	if err := c1.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Restart keeps acknowledged writes.
	if err := s.StopRedis("cache1"); err != nil {
		t.Fatal(err)
	}
	addrs, err = s.StartRedis(ctx, engines.RedisCache{Name: "cache1", Keys: newKeys, NonTLSPort: true})
	if err != nil {
		t.Fatal(err)
	}
	c3 := redisClient(ca, "cache1", addrs.TLS, newKeys[1])
	defer c3.Close()
	if v, err := c3.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after restart: %q %v", v, err)
	}
	plain := redis.NewClient(&redis.Options{Addr: addrs.Plain.String(), Password: newKeys[0]})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err != nil {
		t.Fatalf("non-TLS port: %v", err)
	}
}
