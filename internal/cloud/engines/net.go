package engines

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Engines on a network pods reach (Options.Net). 127.0.0.0/8 is local to every network
// namespace, so a pod that dials 127.x reaches its own loopback, never the host's engine. With
// Net set, the supervisor takes a /24 of it for this data dir and makes the whole /24 local to
// the host with one route ("local 10.245.N.0/24 dev lo", as the kernel routes 127.0.0.0/8):
// every address in it can then be bound and is reached from the host and from pods, whose
// packets come in on the node's bridge with their own source address (so PostgreSQL's pg_hba
// sees the pod's address, as Azure's firewall sees the client's); the host's own connections
// come from 127.0.0.1, as to loopback engines. One route per cloud, no
// interface and no address per engine; it needs CAP_NET_ADMIN, and Close removes it.

// block is the /24 engines of the data dir dir take their addresses from: in 127.0.0.0/8 by
// default (127.1.0.0 to 127.254.255.0, clear of 127.0.0.x, which other programs use), else a
// /24 of n chosen by the data dir, so two clouds on one machine rarely meet.
func block(n netip.Prefix, dir string) (netip.Prefix, error) {
	sum := sha256.Sum256([]byte(dir))
	if !n.IsValid() {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, 1 + sum[0]%254, sum[1], 0}), 24), nil
	}
	n = n.Masked()
	if !n.Addr().Is4() || n.Bits() > 24 || n.Bits() < 8 {
		return netip.Prefix{}, fmt.Errorf("engine network %s: want an IPv4 prefix from /8 to /24", n)
	}
	a := n.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8
	free := 24 - n.Bits() // the bits of the /24's index within n
	idx := (uint32(sum[0])<<16 | uint32(sum[1])<<8 | uint32(sum[2])) & (1<<free - 1)
	v |= idx << 8
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24), nil
}

// localRoute is the route that makes p local to the host.
func localRoute(p netip.Prefix) (*netlink.Route, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("find the loopback interface: %w", err)
	}
	return &netlink.Route{
		LinkIndex: lo.Attrs().Index,
		Dst:       &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)},
		Type:      unix.RTN_LOCAL,
		Table:     unix.RT_TABLE_LOCAL,
		Scope:     netlink.SCOPE_HOST,
		Protocol:  unix.RTPROT_STATIC,
		// The host's own connections to an engine come from 127.0.0.1, as with the default
		// loopback addresses: the same firewall rule admits host processes either way.
		Src: net.IPv4(127, 0, 0, 1),
	}, nil
}

// addLocalRoute makes p local to the host, replacing the route a killed cloud left behind. It
// refuses a prefix another route of the machine already covers (a network it really reaches).
func addLocalRoute(p netip.Prefix) error {
	routes, err := netlink.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue // the default route
		}
		if q, ok := netip.AddrFromSlice(r.Dst.IP); ok {
			bits, _ := r.Dst.Mask.Size()
			if bits > 0 && netip.PrefixFrom(q.Unmap(), bits).Overlaps(p) { // 0: the default route
				return fmt.Errorf("engine addresses %s: this machine routes %s already (choose another engine network)", p, r.Dst)
			}
		}
	}
	r, err := localRoute(p)
	if err != nil {
		return err
	}
	if err := netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("make engine addresses %s local (needs root): %w", p, err)
	}
	return nil
}

// delLocalRoute removes what addLocalRoute added; a route already gone is not an error.
func delLocalRoute(p netip.Prefix) error {
	r, err := localRoute(p)
	if err != nil {
		return err
	}
	if err := netlink.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("remove the route of engine addresses %s: %w", p, err)
	}
	return nil
}
