// Package clouddns is the local cloud's DNS server: it answers Azure's public names that the
// cloud serves (login.microsoftonline.com, management.azure.com, NAME.vault.azure.net, the data
// planes' names) with the address where the cloud serves them, and NXDOMAIN for every other name
// of Azure's zones, as Azure's own DNS does for a deleted resource. It is authoritative for those
// zones only and resolves nothing else (REFUSED): nothing it is asked leaves the machine.
package clouddns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Zones are the Azure zones the cloud answers for (and the node's CoreDNS forwards to it).
var Zones = []string{
	"login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net",
	"management.azure.com", "management.core.windows.net",
	"vault.azure.net",
	"postgres.database.azure.com", "redis.cache.windows.net",
	"blob.core.windows.net", "queue.core.windows.net", "table.core.windows.net",
}

// ErrNotFound is what a Lookup returns for a name that does not exist (NXDOMAIN).
var ErrNotFound = errors.New("no such name")

// Lookup returns the addresses of host (canonical: lower case, no trailing dot), or an error
// wrapping ErrNotFound.
type Lookup func(ctx context.Context, host string) ([]netip.Addr, error)

// TTL is the answers' time to live: short, so a deleted resource stops resolving soon after.
const TTL = 5

// Options configure a server.
type Options struct {
	Addr   string // host:port for UDP and TCP; port 0 picks one free for both
	Lookup Lookup
	Logger *slog.Logger // never receives anything but names and codes
}

// Server is a running DNS server.
type Server struct {
	udp, tcp *dns.Server
	lookup   Lookup
	log      *slog.Logger
	addr     string
	wg       sync.WaitGroup
}

// Start listens on opts.Addr (UDP and TCP, the same port) and serves until Close.
func Start(opts Options) (*Server, error) {
	if opts.Lookup == nil {
		return nil, errors.New("clouddns: Lookup is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{lookup: opts.Lookup, log: opts.Logger}
	pc, ln, err := listenBoth(opts.Addr)
	if err != nil {
		return nil, err
	}
	s.addr = pc.LocalAddr().String()
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h}
	s.tcp = &dns.Server{Listener: ln, Handler: h, ReadTimeout: 5 * time.Second}
	started := make(chan struct{}, 2)
	s.udp.NotifyStartedFunc = func() { started <- struct{}{} }
	s.tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := srv.ActivateAndServe(); err != nil {
				s.log.Debug("DNS server stopped", "err", err)
			}
		}()
	}
	<-started
	<-started
	return s, nil
}

// listenBoth binds UDP and TCP on one port; with port 0, the port UDP got.
func listenBoth(addr string) (net.PacketConn, net.Listener, error) {
	var lc net.ListenConfig
	for range 10 {
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("listen for DNS on %s/udp: %w", addr, err)
		}
		ln, err := lc.Listen(context.Background(), "tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		_ = pc.Close()
		if _, port, _ := net.SplitHostPort(addr); port != "0" {
			return nil, nil, fmt.Errorf("listen for DNS on %s/tcp: %w", addr, err)
		}
	}
	return nil, nil, fmt.Errorf("listen for DNS on %s: no port free for both UDP and TCP", addr)
}

// Addr is the host:port the server answers on (UDP and TCP).
func (s *Server) Addr() string { return s.addr }

// Close stops both listeners and waits for them.
func (s *Server) Close() error {
	err := errors.Join(s.udp.Shutdown(), s.tcp.Shutdown())
	s.wg.Wait()
	return err
}

// InZones reports whether host (canonical) is one of Zones or below one.
func InZones(host string) bool {
	for _, z := range Zones {
		if host == z || strings.HasSuffix(host, "."+z) {
			return true
		}
	}
	return false
}

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	m.RecursionAvailable = false
	defer func() { _ = w.WriteMsg(m) }()
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		m.Rcode = dns.RcodeNotImplemented
		return
	}
	q := req.Question[0]
	host := strings.TrimSuffix(strings.ToLower(q.Name), ".")
	if q.Qclass != dns.ClassINET || !InZones(host) {
		m.Authoritative = false
		m.Rcode = dns.RcodeRefused
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := s.lookup(ctx, host)
	switch {
	case errors.Is(err, ErrNotFound):
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa(host)}
		return
	case err != nil:
		s.log.Warn("DNS lookup failed", "name", host, "err", err)
		m.Rcode = dns.RcodeServerFailure
		return
	}
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: TTL}
	for _, a := range addrs {
		switch {
		case a.Is4() && (q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY):
			hdr.Rrtype = dns.TypeA
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		case a.Is6() && !a.Is4In6() && (q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY):
			hdr.Rrtype = dns.TypeAAAA
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{soa(host)} // the name exists, not with this type (NODATA)
	}
}

// soa is the zone's SOA for negative answers, so resolvers cache them only for TTL seconds.
func soa(host string) dns.RR {
	zone := host
	for _, z := range Zones {
		if host == z || strings.HasSuffix(host, "."+z) {
			zone = z
			break
		}
	}
	return &dns.SOA{
		Hdr: dns.RR_Header{Name: dns.Fqdn(zone), Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns:  "ns.cerulean.local.", Mbox: "hostmaster.cerulean.local.",
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: TTL,
	}
}
