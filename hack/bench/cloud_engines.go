package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v5"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/cerulean/cerulean/internal/cloud"
)

func init() {
	register(section{title: "Local cloud: PostgreSQL and Redis", run: benchCloudEngines})
}

// engineRuns is how many servers and caches are created, one after another: the figures are
// their median.
const engineRuns = 3

// benchCloudEngines creates PostgreSQL flexible servers and Redis caches through the SDK's ARM
// clients, each timed from the PUT to the first query that succeeds with the SDK's and the
// drivers' defaults (the client retrying every 100 ms, as an app waiting for its database
// does), then reads the idle engines' resident memory: a server's postmaster with its
// background processes, a cache's redis-server.
func benchCloudEngines(ctx context.Context, env benchEnv) ([]row, error) {
	c, err := startCloud(ctx, env, "cloud-engines", cloud.Options{})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	opts := c.ClientOptions()
	cred, err := ownerCred(c, opts)
	if err != nil {
		return nil, err
	}
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	if err := createBenchGroup(ctx, s, cred, armOpts); err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, err
	}
	ca := x509.NewCertPool()
	ca.AppendCertsFromPEM(pem)
	servers, err := armpostgresqlflexibleservers.NewServersClient(s.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, err
	}
	rules, err := armpostgresqlflexibleservers.NewFirewallRulesClient(s.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, err
	}
	caches, err := armredis.NewClient(s.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, err
	}

	var pgTimes, redisTimes []time.Duration
	for i := range engineRuns {
		d, err := pgFirstQuery(ctx, c, servers, rules, ca, fmt.Sprintf("bench-pg-%d", i))
		if err != nil {
			return nil, err
		}
		pgTimes = append(pgTimes, d)
		d, err = redisFirstQuery(ctx, c, caches, ca, fmt.Sprintf("bench-cache-%d", i))
		if err != nil {
			return nil, err
		}
		redisTimes = append(redisTimes, d)
	}
	time.Sleep(5 * time.Second) // idle: the engines' start-up work done
	pgRSS, redisRSS := engineRSS(os.Getpid())
	if len(pgRSS) != engineRuns || len(redisRSS) != engineRuns {
		return nil, fmt.Errorf("found %d PostgreSQL servers and %d Redis caches among the cloud's processes, want %d of each", len(pgRSS), len(redisRSS), engineRuns)
	}
	median := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	mib := func(v []float64) string {
		slices.Sort(v)
		return fmt.Sprintf("%.1f MiB (of %d: %.1f–%.1f)", v[len(v)/2], len(v), v[0], v[len(v)-1])
	}
	return []row{
		{benchmark: fmt.Sprintf("PostgreSQL flexible server, PUT to first successful query (pgx, verify-full), median of %d", engineRuns), result: median(pgTimes).Round(10 * time.Millisecond).String()},
		{benchmark: fmt.Sprintf("Redis cache, PUT to first successful PING (go-redis, TLS 6380, a key from listKeys), median of %d", engineRuns), result: median(redisTimes).Round(10 * time.Millisecond).String()},
		{benchmark: "PostgreSQL server idle memory, PSS of the postmaster and its background processes", result: mib(pgRSS), vsBaseline: "budget 40 MiB"},
		{benchmark: "Redis cache idle memory, PSS of redis-server", result: mib(redisRSS), vsBaseline: "budget 15 MiB"},
	}, nil
}

// pgFirstQuery creates server name and a firewall rule that admits loopback (a new server
// admits no one, as in Azure), and returns the time from the server's PUT to a SELECT answered.
func pgFirstQuery(ctx context.Context, c *cloud.Cloud, servers *armpostgresqlflexibleservers.ServersClient,
	rules *armpostgresqlflexibleservers.FirewallRulesClient, ca *x509.CertPool, name string,
) (time.Duration, error) {
	const login, password = "benchadmin", "Bench-pw-123" //nolint:gosec // a throwaway server in the bench's own cloud
	start := time.Now()
	if _, err := servers.BeginCreateOrUpdate(ctx, "rg-bench", name, armpostgresqlflexibleservers.Server{
		Location: to.Ptr("eastus"),
		SKU:      &armpostgresqlflexibleservers.SKU{Name: to.Ptr("Standard_B1ms"), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTierBurstable)},
		Properties: &armpostgresqlflexibleservers.ServerProperties{AdministratorLogin: to.Ptr(login), AdministratorLoginPassword: to.Ptr(password),
			Version: to.Ptr(armpostgresqlflexibleservers.PostgresMajorVersion("16"))},
	}, nil); err != nil {
		return 0, fmt.Errorf("create server %s: %w", name, err)
	}
	fqdn := name + ".postgres.database.azure.com"
	ruled := false
	return untilOK(ctx, "PostgreSQL server "+name, start, func(ctx context.Context) error {
		if !ruled { // refused until the server exists
			if _, err := rules.BeginCreateOrUpdate(ctx, "rg-bench", name, "loopback", armpostgresqlflexibleservers.FirewallRule{
				Properties: &armpostgresqlflexibleservers.FirewallRuleProperties{StartIPAddress: to.Ptr("127.0.0.0"), EndIPAddress: to.Ptr("127.255.255.255")},
			}, nil); err != nil {
				return err
			}
			ruled = true
		}
		ap, ok := c.DataPlaneEndpoint(fqdn)
		if !ok {
			return errors.New("does not resolve yet")
		}
		cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s:%d/postgres?sslmode=verify-full", login, password, fqdn, ap.Port()))
		if err != nil {
			return err
		}
		cfg.TLSConfig.RootCAs = ca
		cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{ap.Addr().String()}, nil }
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var one int
		return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	})
}

// redisFirstQuery creates cache name and returns the time from its PUT to a PING answered.
func redisFirstQuery(ctx context.Context, c *cloud.Cloud, caches *armredis.Client, ca *x509.CertPool, name string) (time.Duration, error) {
	start := time.Now()
	if _, err := caches.BeginCreate(ctx, "rg-bench", name, armredis.CreateParameters{Location: to.Ptr("eastus"), Properties: &armredis.CreateProperties{
		SKU: &armredis.SKU{Name: to.Ptr(armredis.SKUNameBasic), Family: to.Ptr(armredis.SKUFamilyC), Capacity: to.Ptr[int32](0)},
	}}, nil); err != nil {
		return 0, fmt.Errorf("create cache %s: %w", name, err)
	}
	host := name + ".redis.cache.windows.net"
	return untilOK(ctx, "Redis cache "+name, start, func(ctx context.Context) error {
		keys, err := caches.ListKeys(ctx, "rg-bench", name, nil)
		if err != nil {
			return err
		}
		ap, ok := c.DataPlaneEndpoint(host)
		if !ok {
			return errors.New("does not resolve yet")
		}
		rc := redis.NewClient(&redis.Options{Addr: ap.String(), Password: *keys.PrimaryKey, MaxRetries: -1,
			TLSConfig: &tls.Config{RootCAs: ca, ServerName: host, MinVersion: tls.VersionTLS12}})
		defer rc.Close()
		return rc.Ping(ctx).Err()
	})
}

// untilOK tries query every 100 ms until it succeeds, and returns the time since start; it
// gives up after two minutes with the last error.
func untilOK(ctx context.Context, what string, start time.Time, query func(context.Context) error) (time.Duration, error) {
	deadline := start.Add(2 * time.Minute)
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := query(qctx)
		cancel()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: no successful query within 2 minutes: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// engineRSS is the resident memory (MiB) of each PostgreSQL server and each Redis cache among
// parent's children: a postmaster with its own children, a redis-server alone. It is their
// proportional set size, so that the pages a server's processes share (its shared buffers,
// the executable) count once, not once per process.
func engineRSS(parent int) (pg, rds []float64) {
	children := map[int][]int{}
	exe := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fields := statFields(pid)
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], pid)
		exe[pid], _ = os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
	}
	for _, pid := range children[parent] {
		switch filepath.Base(exe[pid]) {
		case "postgres":
			total := pssMiB(pid)
			for _, child := range children[pid] {
				total += pssMiB(child)
			}
			pg = append(pg, total)
		case "redis-server", "redis-check-rdb": // Debian's redis-server is a link to redis-check-rdb
			rds = append(rds, pssMiB(pid))
		}
	}
	return pg, rds
}

// pssMiB is pid's proportional set size in MiB (/proc/PID/smaps_rollup), 0 when unreadable.
func pssMiB(pid int) float64 {
	return float64(procKiB(pid, "smaps_rollup", "Pss")["Pss"]) / 1024
}
