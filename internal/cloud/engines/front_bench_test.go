package engines

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cerulean/cerulean/internal/pki"
)

// BenchmarkRedisQuery is a GET's latency through the firewall front (the cache's public TLS
// port, what clients use) against redis-server's own TLS port: p50 and p99 per query, one
// client at a time. go test ./internal/cloud/engines -run '^$' -bench RedisQuery -benchtime 10000x
func BenchmarkRedisQuery(b *testing.B) {
	dir := b.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"), pkix.Name{CommonName: "bench CA"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Options{Dir: dir, CA: ca})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	keys := [2]string{"bench-key-one", "bench-key-two"}
	// A rule that admits the client, so the front judges every connection.
	addrs, err := s.StartRedis(b.Context(), RedisCache{Name: "bench", Keys: keys,
		Firewall: []IPRange{{Start: netip.MustParseAddr("10.0.0.0"), End: netip.MustParseAddr("127.255.255.255")}}})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := s.get(redisKey("bench"))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	client := func(addr netip.AddrPort) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr.String(), Password: keys[0],
			TLSConfig: &tls.Config{RootCAs: pool, ServerName: addrs.TLS.Addr().String(), MinVersion: tls.VersionTLS12}})
	}
	// Queries alternate between the two paths, so a busy machine weighs on both alike.
	front, direct := client(addrs.TLS), client(p.inner)
	defer front.Close()
	defer direct.Close()
	ctx := b.Context()
	if err := front.Set(ctx, "k", "value", 0).Err(); err != nil {
		b.Fatal(err)
	}
	lat := [2][]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for i, c := range []*redis.Client{front, direct} {
			t0 := time.Now()
			if err := c.Get(ctx, "k").Err(); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	b.StopTimer()
	for i, name := range []string{"front", "direct"} {
		slices.Sort(lat[i])
		b.ReportMetric(float64(lat[i][len(lat[i])/2].Microseconds()), name+"-p50-µs")
		b.ReportMetric(float64(lat[i][len(lat[i])*99/100].Microseconds()), name+"-p99-µs")
	}
}
