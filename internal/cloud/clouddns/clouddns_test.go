package clouddns

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestInZones(t *testing.T) {
	for host, want := range map[string]bool{
		"login.microsoftonline.com": true, "kv1.vault.azure.net": true, "vault.azure.net": true,
		"a.b.blob.core.windows.net": true, "pg.postgres.database.azure.com": true,
		"evilvault.azure.net": false, "example.com": false, "core.windows.net": false, "": false,
		"management.azure.com.evil.example": false,
	} {
		if got := InZones(host); got != want {
			t.Errorf("InZones(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestServerAnswers: over UDP and TCP, a name the lookup knows gets its address, an unknown one
// NXDOMAIN with the zone's SOA, a lookup failure SERVFAIL, another zone REFUSED, and a message
// with two questions FORMERR (refused by the server library before any lookup).
func TestServerAnswers(t *testing.T) {
	s, err := Start(Options{Addr: "127.0.0.1:0", Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "kv1.vault.azure.net":
			return []netip.Addr{netip.MustParseAddr("10.244.0.1")}, nil
		case "broken.vault.azure.net":
			return nil, errors.New("store unavailable")
		}
		return nil, ErrNotFound
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, network := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: network, Timeout: 5 * time.Second}
		ask := func(name string) *dns.Msg {
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(name), dns.TypeA)
			in, _, err := c.Exchange(m, s.Addr())
			if err != nil {
				t.Fatalf("%s %s: %v", network, name, err)
			}
			return in
		}
		if in := ask("KV1.vault.azure.net"); in.Rcode != dns.RcodeSuccess || len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "10.244.0.1" || !in.Authoritative {
			t.Errorf("%s kv1: %v", network, in)
		}
		if in := ask("kv2.vault.azure.net"); in.Rcode != dns.RcodeNameError || len(in.Ns) != 1 || in.Ns[0].Header().Name != "vault.azure.net." {
			t.Errorf("%s kv2: %v", network, in)
		}
		if in := ask("broken.vault.azure.net"); in.Rcode != dns.RcodeServerFailure {
			t.Errorf("%s broken: %v", network, in)
		}
		if in := ask("example.com"); in.Rcode != dns.RcodeRefused {
			t.Errorf("%s example.com: %v", network, in)
		}
		m := new(dns.Msg)
		m.SetQuestion("kv1.vault.azure.net.", dns.TypeA)
		m.Question = append(m.Question, m.Question[0])
		if in, _, err := c.Exchange(m, s.Addr()); err != nil || in.Rcode != dns.RcodeFormatError {
			t.Errorf("%s two questions: %v %v", network, in, err)
		}
	}
}
