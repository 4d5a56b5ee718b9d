package engines

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Addresses. Every engine gets an IPv4 address of its own and listens on its protocol's
// standard port there (5432, 6380, 6379), as each Azure server has its own address. By default
// the address is in 127.0.0.0/8 (all of it is the loopback interface's on Linux, so no root and
// nothing to clean up), which only the host reaches; with Options.Net it is in a /24 of that
// network that pods reach too (net.go). The /24 is chosen from the data dir, so two clouds on
// one machine do not meet; the address is kept in the engine's directory ("addr") across
// restarts, and taken again when the cloud now runs on another network. When the standard port is taken
// on that address (a wildcard listener of another program), the engine falls back to
// 127.0.0.1 and a free port of its own, kept in the engine's directory too.

// engineAddr is the engine's address, allocated on first use.
func (s *Supervisor) engineAddr(dir string) (netip.Addr, error) {
	file := filepath.Join(dir, "addr")
	if b, err := os.ReadFile(file); err == nil {
		if a, err := netip.ParseAddr(strings.TrimSpace(string(b))); err == nil && s.block.Contains(a) {
			return a, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	used := map[netip.Addr]bool{}
	for _, kind := range []string{"postgres", "redis"} {
		files, _ := filepath.Glob(filepath.Join(s.o.Dir, "engines", kind, "*", "addr"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				if a, err := netip.ParseAddr(strings.TrimSpace(string(b))); err == nil {
					used[a] = true
				}
			}
		}
	}
	base := s.block.Addr().As4()
	for i := 1; i < 255; i++ {
		base[3] = byte(i)
		a := netip.AddrFrom4(base)
		if !used[a] {
			if err := os.WriteFile(file, []byte(a.String()+"\n"), 0o644); err != nil { //nolint:gosec // an address, not a secret
				return netip.Addr{}, err
			}
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free engine address in %s/24", netip.AddrFrom4([4]byte{base[0], base[1], base[2], 0}))
}

// listenAt is where an engine listens for a protocol: its own address and the standard port,
// or 127.0.0.1 and a port kept in portFile when that is taken.
func listenAt(addr netip.Addr, std int, portFile string) (netip.AddrPort, error) {
	if l, err := net.Listen("tcp", netip.AddrPortFrom(addr, uint16(std)).String()); err == nil { //nolint:gosec // std is a well-known port below 65536
		_ = l.Close()
		return netip.AddrPortFrom(addr, uint16(std)), nil //nolint:gosec // as above
	}
	n, err := port(portFile)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(n)), nil //nolint:gosec // n is a port from the kernel
}
