package nodeagent

import (
	"encoding/binary"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// DefaultTable is the node agent's own nftables table (family ip).
const DefaultTable = "cerulean-node-agent"

// MetadataIP is the instance-metadata address pods ask.
const MetadataIP = "169.254.169.254"

// redirectChain is the table's one chain: nat at prerouting, just ahead of the usual dstnat
// priority so that no other nat chain (kube-proxy's, say) decides first.
const redirectChain = "prerouting"

var tableName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// redirect installs, checks and removes the DNAT of pods' 169.254.169.254:80 to the agent. The
// rules are nftables rules in a table of the agent's own, written over netlink: the agent needs
// CAP_NET_ADMIN but no iptables or nft binary, so its image is one static binary. They coexist
// with iptables rules, legacy or nft, as the kernel runs every nat chain of the hook.
type redirect struct {
	table      string
	interfaces []string
	ip         net.IP // 4 bytes
	port       uint16
	netns      int // the network namespace's fd (tests); 0: the agent's own
}

func newRedirect(table string, interfaces []string, ip net.IP, port int) (*redirect, error) {
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("nftables table %q: want 1 to 64 letters, digits, '-' or '_'", table)
	}
	ip4 := ip.To4()
	if ip4 == nil {
		return nil, fmt.Errorf("node IP %v: the DNAT of %s needs an IPv4 address", ip, MetadataIP)
	}
	for _, iface := range interfaces {
		name := strings.TrimSuffix(iface, "+")
		if len(name) >= unix.IFNAMSIZ || (name == "" && iface != "+") || strings.ContainsAny(name, "+/ \x00") {
			return nil, fmt.Errorf("pod interface %q: want an interface name, or a prefix ending in '+' (veth+)", iface)
		}
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("agent port %d: out of range", port)
	}
	return &redirect{table: table, interfaces: interfaces, ip: ip4, port: uint16(port)}, nil //nolint:gosec // checked above
}

func (r *redirect) target() string { return net.JoinHostPort(r.ip.String(), fmt.Sprint(r.port)) }

// comment names a rule; Ensure compares the comments to find a changed or missing rule.
func (r *redirect) comment(iface string) string {
	return fmt.Sprintf("cerulean node agent: pods' IMDS on %s to %s", iface, r.target())
}

func (r *redirect) nft() (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if r.netns != 0 {
		opts = append(opts, nftables.WithNetNSFd(r.netns))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("open netlink: %w", err)
	}
	return c, nil
}

// Install replaces the table with the wanted one in one transaction: what a killed agent left
// (a DNAT to its dead port) is gone, and there is no moment without the rules. Then it makes
// connections to IMDS opened without the rules start over through them.
func (r *redirect) Install() error {
	c, err := r.nft()
	if err != nil {
		return err
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: r.table}
	c.AddTable(t) // so that the delete cannot fail on an absent table
	c.DelTable(t)
	c.AddTable(t)
	ch := c.AddChain(&nftables.Chain{Name: redirectChain, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATDest - 1)})
	for _, iface := range r.interfaces {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r.dnat(iface),
			UserData: userdata.AppendString(nil, userdata.TypeComment, r.comment(iface))})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install nftables table %s: %w", r.table, err)
	}
	return r.forgetIMDSConnections()
}

// forgetIMDSConnections deletes conntrack's entries of TCP connections to 169.254.169.254:80.
// NAT is decided on a connection's first packet: a pod's connection to IMDS made while no rule
// was there (before the agent's first start, or while it was gone) would otherwise keep
// reaching IMDS, which answers any pod with the node's identities. Without its entry the
// connection's next packet is taken for a new one, DNATed to the agent, and reset; the pod's
// SDK connects again, to the agent.
func (r *redirect) forgetIMDSConnections() error {
	ns := netns.None()
	if r.netns != 0 {
		ns = netns.NsHandle(r.netns)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("open conntrack netlink: %w", err)
	}
	defer h.Close()
	f := &netlink.ConntrackFilter{}
	if err := f.AddIP(netlink.ConntrackOrigDstIP, net.ParseIP(MetadataIP)); err != nil {
		return err
	}
	if err := f.AddProtocol(unix.IPPROTO_TCP); err != nil {
		return err
	}
	if err := f.AddPort(netlink.ConntrackOrigDstPort, 80); err != nil {
		return err
	}
	if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, f); err != nil {
		return fmt.Errorf("delete conntrack entries of connections to %s:80: %w", MetadataIP, err)
	}
	return nil
}

// Ensure re-installs the table when its chain or a rule is missing or differs.
func (r *redirect) Ensure() (changed bool, err error) {
	ok, err := r.present()
	if err != nil || ok {
		return false, err
	}
	return true, r.Install()
}

func (r *redirect) present() (bool, error) {
	c, err := r.nft()
	if err != nil {
		return false, err
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: r.table}
	// ListChain would say no more than "not found" in a string: list the family's chains.
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return false, fmt.Errorf("list nftables chains: %w", err)
	}
	i := slices.IndexFunc(chains, func(ch *nftables.Chain) bool { return ch.Table.Name == r.table && ch.Name == redirectChain })
	if i < 0 {
		return false, nil
	}
	ch := chains[i]
	if ch.Type != nftables.ChainTypeNAT || ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookPrerouting {
		return false, nil
	}
	rules, err := c.GetRules(t, ch)
	if err != nil {
		return false, fmt.Errorf("read nftables rules of %s: %w", r.table, err)
	}
	var have, want []string
	for _, rule := range rules {
		s, _ := userdata.GetString(rule.UserData, userdata.TypeComment)
		have = append(have, s)
	}
	for _, iface := range r.interfaces {
		want = append(want, r.comment(iface))
	}
	return slices.Equal(have, want), nil
}

// Remove deletes the table; an absent table is no error.
func (r *redirect) Remove() error {
	c, err := r.nft()
	if err != nil {
		return err
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: r.table}
	c.AddTable(t)
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("remove nftables table %s: %w", r.table, err)
	}
	return nil
}

// dnat is `iifname IFACE ip daddr 169.254.169.254 tcp dport 80 dnat to IP:PORT`, as nft
// compiles it.
func (r *redirect) dnat(iface string) []expr.Any {
	var e []expr.Any
	if name, wildcard := strings.CutSuffix(iface, "+"); !wildcard {
		padded := make([]byte, unix.IFNAMSIZ)
		copy(padded, name)
		e = append(e, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: padded})
	} else if name != "" {
		e = append(e, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(name)})
	}
	port := binary.BigEndian.AppendUint16(nil, r.port)
	return append(e,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: net.ParseIP(MetadataIP).To4()},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, 80)},
		&expr.Immediate{Register: 1, Data: r.ip},
		&expr.Immediate{Register: 2, Data: port},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 1,
			RegProtoMin: 2, RegProtoMax: 2, Specified: true},
	)
}
