package manager_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

const cacheAPI = "cache.azure.com/v1api20241101"

// A FlexibleServer with a database, a firewall rule and a User, and a Redis with its firewall
// rule, go Ready against the cloud's real engines; the server's host name and the cache's keys
// are exported as ASO names them; the User is a role the app logs in as, and a change of its
// password Secret or of the administrator's is applied in the server; nothing is written in
// steady state; deleting the server's object deletes its children's objects.
func TestPostgreSQLAndRedisKinds(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	const sync = 2 * time.Second
	startManagerLogged(t, az, sync, ns)
	log := az.RequestLog()
	suffix := strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	server, cache := "kinds-pg-"+suffix, "kinds-redis-"+suffix

	secret := func(name, value string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"password": value}}
	}
	for _, s := range []*corev1.Secret{secret("pg-admin", "Admin-pw-one-1"), secret("app-user", "User-pw-one-1")} {
		if err := c.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	rg := resourceGroup("kinds-pgr-"+suffix, nil)
	pg := owned(pgAPI, "FlexibleServer", "pg", rg.GetName(), map[string]any{
		"azureName": server, "location": "westus2", "version": "15", "administratorLogin": "pgadmin",
		"administratorLoginPassword": map[string]any{"name": "pg-admin", "key": "password"},
		"sku":                        map[string]any{"name": "Standard_B1ms", "tier": "Burstable"},
		"storage":                    map[string]any{"storageSizeGB": 32},
		"operatorSpec": map[string]any{"configMaps": map[string]any{
			"fullyQualifiedDomainName": map[string]any{"name": "pg-out", "key": "host"}}},
	})
	db := owned(pgAPI, "FlexibleServersDatabase", "appdb", "pg", map[string]any{"charset": "UTF8"})
	fw := owned(pgAPI, "FlexibleServersFirewallRule", "loopback", "pg", map[string]any{"startIpAddress": "127.0.0.0", "endIpAddress": "127.255.255.255"})
	user := owned("dbforpostgresql.azure.com/v1", "User", "appuser", "pg", map[string]any{
		"roles": []any{}, "roleOptions": map[string]any{"login": true, "createDb": true},
		"localUser": map[string]any{"serverAdminUsername": "pgadmin",
			"serverAdminPassword": map[string]any{"name": "pg-admin", "key": "password"},
			"password":            map[string]any{"name": "app-user", "key": "password"}},
	})
	redis := owned(cacheAPI, "Redis", "cache", rg.GetName(), map[string]any{
		"azureName": cache, "location": "westus2", "sku": map[string]any{"name": "Basic", "family": "C", "capacity": 0},
		"redisVersion": "6",
		"operatorSpec": map[string]any{"secrets": map[string]any{
			"hostName":   map[string]any{"name": "redis-out", "key": "host"},
			"sslPort":    map[string]any{"name": "redis-out", "key": "port"},
			"primaryKey": map[string]any{"name": "redis-out", "key": "key"}}},
	})
	rfw := owned(cacheAPI, "RedisFirewallRule", "all", "cache", map[string]any{"startIP": "127.0.0.1", "endIP": "127.0.0.1"})
	all := []*unstructured.Unstructured{user, db, fw, rfw, rg, pg, redis}
	create(t, c, ns, all...)
	for _, u := range []*unstructured.Unstructured{rg, pg, redis, user, db, fw, rfw} { // owners first: a failure names the cause
		waitReady(t, c, u, 3*time.Minute)
	}

	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "pg-out"}, cm); err != nil {
		t.Fatal(err)
	}
	if want := server + ".postgres.database.azure.com"; cm.Data["host"] != want {
		t.Errorf("exported host %q, want %q", cm.Data["host"], want)
	}
	out := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "redis-out"}, out); err != nil {
		t.Fatal(err)
	}
	if string(out.Data["host"]) != cache+".redis.cache.windows.net" || string(out.Data["port"]) != "6380" || len(out.Data["key"]) == 0 {
		t.Errorf("redis exports: host %q port %q key set %t", out.Data["host"], out.Data["port"], len(out.Data["key"]) > 0)
	}

	login := func(userName, password string) error {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=5432 dbname=postgres sslmode=require user=%s", cm.Data["host"], userName))
		if err != nil {
			return err
		}
		cfg.Password = password
		cfg.DialFunc = dataPlaneDial(az)
		cfg.LookupFunc = func(_ context.Context, h string) ([]string, error) { return []string{h}, nil }
		conn, err := pgx.ConnectConfig(t.Context(), cfg)
		if err != nil {
			return err
		}
		return conn.Close(t.Context())
	}
	if err := login("appuser", "User-pw-one-1"); err != nil {
		t.Fatalf("the User cannot log in: %v", err)
	}

	since := log.Last()
	time.Sleep(3 * sync)
	if puts := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since}); puts != 0 {
		t.Errorf("steady state sent %d PUTs over three sync periods, want 0", puts)
	}

	for name, pw := range map[string]string{"app-user": "User-pw-two-2", "pg-admin": "Admin-pw-two-2"} {
		s := &corev1.Secret{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{"password": []byte(pw)}
		if err := c.Update(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "the new passwords are applied", func() (bool, string) {
		errAdmin, errUser := login("pgadmin", "Admin-pw-two-2"), login("appuser", "User-pw-two-2")
		return errAdmin == nil && errUser == nil, fmt.Sprintf("admin: %v; user: %v", errAdmin, errUser)
	})

	if err := c.Delete(t.Context(), pg); err != nil {
		t.Fatal(err)
	}
	for _, u := range []*unstructured.Unstructured{pg, db, fw, user} {
		waitGone(t, c, u, 2*time.Minute)
	}
}
