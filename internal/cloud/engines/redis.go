package engines

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCache is what a cache's engine needs from its ARM resource.
type RedisCache struct {
	Name       string // the cache's name: it answers as NAME.redis.cache.windows.net
	Keys       [2]string
	NonTLSPort bool // enableNonSslPort
	// Firewall are the cache's firewall rules: none admits every client (front.go).
	Firewall []IPRange
}

// RedisAddrs are where a cache listens: TLS always, the plain port only with enableNonSslPort.
type RedisAddrs struct {
	TLS   netip.AddrPort
	Plain netip.AddrPort // zero when the non-TLS port is off
}

// RedisHost is a cache's public name.
func RedisHost(name string) string { return name + ".redis.cache.windows.net" }

func redisKey(name string) string { return "redis/" + strings.ToLower(name) }

// StartRedis starts the cache's redis-server, with both access keys as the default user's two
// passwords, an append-only file fsynced on every write, and TLS with a certificate for its
// name; it waits until the server answers. Its public ports are fronts that enforce the
// firewall rules (front.go); redis-server itself listens on 127.0.0.1. A running cache is
// restarted only if its non-TLS port setting changed; its rules are replaced.
func (s *Supervisor) StartRedis(ctx context.Context, c RedisCache) (RedisAddrs, error) {
	if p, ok := s.get(redisKey(c.Name)); ok {
		if (p.addr.IsValid()) == c.NonTLSPort {
			p.gate.set(c.Firewall)
			return RedisAddrs{TLS: p.tls, Plain: p.addr}, nil
		}
		if err := s.stopKey(redisKey(c.Name)); err != nil {
			return RedisAddrs{}, err
		}
	}
	acct, err := engineUser("redis")
	if err != nil {
		return RedisAddrs{}, err
	}
	dir := s.dir("redis", c.Name)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return RedisAddrs{}, err
	}
	own, err := s.engineAddr(dir)
	if err != nil {
		return RedisAddrs{}, err
	}
	tlsAddr, err := listenAt(own, 6380, filepath.Join(dir, "tls-port"))
	if err != nil {
		return RedisAddrs{}, err
	}
	var plainAddr netip.AddrPort
	if c.NonTLSPort {
		if plainAddr, err = listenAt(own, 6379, filepath.Join(dir, "port")); err != nil {
			return RedisAddrs{}, err
		}
	}
	// redis-server's own ports, behind the fronts.
	innerTLS, err := port(filepath.Join(dir, "engine-tls-port"))
	if err != nil {
		return RedisAddrs{}, err
	}
	innerPlain := 0
	if c.NonTLSPort {
		if innerPlain, err = port(filepath.Join(dir, "engine-port")); err != nil {
			return RedisAddrs{}, err
		}
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	certFile, keyFile, err := s.writeServing(dir, RedisHost(c.Name), tlsAddr.Addr())
	if err != nil {
		return RedisAddrs{}, err
	}
	confFile, err := s.writeRedisConf(dir, certFile, keyFile, innerPlain, innerTLS, c.Keys)
	if err != nil {
		return RedisAddrs{}, err
	}
	if err := acct.own(dir); err != nil {
		return RedisAddrs{}, err
	}
	p, err := launch(command(acct, "redis-server", confFile))
	if err != nil {
		return RedisAddrs{}, fmt.Errorf("start Redis for %s: %w", c.Name, err)
	}
	p.tls, p.addr = tlsAddr, plainAddr
	p.inner = netip.AddrPortFrom(loopback, uint16(innerTLS)) //nolint:gosec // a port from the kernel
	p.gate = &gate{}
	p.gate.set(c.Firewall)
	p.stop = func(p *proc) error {
		closeFronts(p)
		return terminate(p, syscall.SIGTERM, 30*time.Second)
	}
	keys := c.Keys
	ready := func(ctx context.Context) error { return s.redisDo(ctx, p, keys[0], "PING") }
	if err := waitReady(ctx, p, "Redis", ready); err != nil {
		_ = p.stop(p)
		return RedisAddrs{}, fmt.Errorf("start Redis for %s: %w", c.Name, err)
	}
	pairs := [][2]netip.AddrPort{{tlsAddr, p.inner}}
	if plainAddr.IsValid() {
		pairs = append(pairs, [2]netip.AddrPort{plainAddr, netip.AddrPortFrom(loopback, uint16(innerPlain))}) //nolint:gosec // as above
	}
	for _, pair := range pairs {
		f, err := listenFront(pair[0], pair[1], p.gate, c.Name, s.log)
		if err != nil {
			_ = p.stop(p)
			return RedisAddrs{}, fmt.Errorf("start Redis for %s: listen on %s: %w", c.Name, pair[0], err)
		}
		p.setFronts(append(p.getFronts(), f))
	}
	// A redis-server that dies takes its fronts with it: its ports are free for the next start.
	go func() {
		<-p.done
		closeFronts(p)
	}()
	if err := s.put(redisKey(c.Name), p); err != nil {
		_ = p.stop(p)
		return RedisAddrs{}, err
	}
	s.log.InfoContext(ctx, "Started Redis", "cache", c.Name, "tls", p.tls.String())
	return RedisAddrs{TLS: p.tls, Plain: p.addr}, nil
}

// writeRedisConf writes redis-server's configuration under dir: loopback only on its own
// ports (the fronts face clients), TLS with the cache's certificate, every write fsynced, and the
// default user with the cache's two keys. It returns the file's path.
func (s *Supervisor) writeRedisConf(dir, certFile, keyFile string, innerPlain, innerTLS int, keys [2]string) (string, error) {
	data := filepath.Join(dir, "data")
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, s.o.CA.PEM(), 0o644); err != nil { //nolint:gosec // the CA certificate is public
		return "", err
	}
	conf := strings.Join([]string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(innerPlain),
		"tls-port " + strconv.Itoa(innerTLS),
		"tls-cert-file " + certFile,
		"tls-key-file " + keyFile,
		"tls-ca-cert-file " + caFile,
		"tls-auth-clients no",
		"tls-protocols \"TLSv1.2 TLSv1.3\"",
		"dir " + data,
		"appendonly yes",
		"appendfsync always",
		`save ""`,
		"daemonize no",
		"logfile \"\"",
		"loglevel warning",
		"user default on " + ">" + keys[0] + " >" + keys[1] + " ~* &* +@all",
		"",
	}, "\n")
	confFile := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return "", err
	}
	return confFile, nil
}

// redisDo runs one command over TLS as the default user with key, on redis-server's own port
// (the cloud is not subject to the cache's firewall).
func (s *Supervisor) redisDo(ctx context.Context, p *proc, key string, args ...any) error {
	pool := x509.NewCertPool()
	pool.AddCert(s.o.CA.Cert)
	c := redis.NewClient(&redis.Options{
		Addr: p.inner.String(), Password: key, DB: 0, MaxRetries: -1, DialTimeout: 5 * time.Second,
		TLSConfig:       &tls.Config{RootCAs: pool, ServerName: p.tls.Addr().String(), MinVersion: tls.VersionTLS12},
		DisableIdentity: true,
	})
	defer c.Close()
	return c.Do(ctx, args...).Err()
}

// SetRedisKeys makes exactly these two keys valid: a regenerated key stops working for new
// authentications at once, the other keeps working (ACL SETUSER resetpass, then both).
func (s *Supervisor) SetRedisKeys(ctx context.Context, name string, current string, keys [2]string) error {
	p, ok := s.get(redisKey(name))
	if !ok {
		return nil // the keys are written at the next start
	}
	err := s.redisDo(ctx, p, current, "ACL", "SETUSER", "default", "resetpass", ">"+keys[0], ">"+keys[1])
	if err != nil {
		return fmt.Errorf("set the access keys of %s: %w", name, err)
	}
	return nil
}

// SetRedisFirewall replaces a running cache's firewall rules at once, for new connections (a
// cache that does not run gets them at its next StartRedis).
func (s *Supervisor) SetRedisFirewall(name string, rules []IPRange) {
	if p, ok := s.get(redisKey(name)); ok {
		p.gate.set(rules)
	}
}

// closeFronts closes a cache's public ports and the connections through them.
func closeFronts(p *proc) {
	for _, f := range p.setFronts(nil) {
		_ = f.close()
	}
}

// StopRedis stops the cache's server, if it runs.
func (s *Supervisor) StopRedis(name string) error { return s.stopKey(redisKey(name)) }

// RemoveRedis stops the cache and deletes its data.
func (s *Supervisor) RemoveRedis(name string) error {
	err := s.StopRedis(name)
	if rerr := os.RemoveAll(s.dir("redis", name)); rerr != nil {
		err = rerr
	}
	return err
}

// RedisAddr is where a running cache listens.
func (s *Supervisor) RedisAddr(name string) (RedisAddrs, bool) {
	p, ok := s.get(redisKey(name))
	if !ok {
		return RedisAddrs{}, false
	}
	return RedisAddrs{TLS: p.tls, Plain: p.addr}, true
}
