package nodeagent

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cerulean/cerulean/internal/testenv"
)

func TestNewRedirectRefusesBadInput(t *testing.T) {
	ip := net.IPv4(10, 0, 0, 1)
	for _, tc := range []struct {
		name, table string
		ifaces      []string
		ip          net.IP
		want        string
	}{
		{"table with a space", "my table", []string{"cni0"}, ip, "nftables table"},
		{"table too long", strings.Repeat("t", 65), []string{"cni0"}, ip, "nftables table"},
		{"IPv6 node", "", []string{"cni0"}, net.ParseIP("fd00::1"), "needs an IPv4 address"},
		{"no node IP", "", []string{"cni0"}, nil, "needs an IPv4 address"},
		{"interface name too long", "", []string{"a-sixteen-chars!"}, ip, "pod interface"},
		{"empty interface", "", []string{""}, ip, "pod interface"},
		{"'+' inside a name", "", []string{"ve+th"}, ip, "pod interface"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newRedirect(tc.table, tc.ifaces, tc.ip, 2579); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("newRedirect: %v, want an error about %q", err, tc.want)
			}
		})
	}
	if r, err := newRedirect("", []string{"cni0", "veth+", "+"}, ip, 2579); err != nil || r.table != DefaultTable {
		t.Fatalf("valid input: %+v, %v", r, err)
	}
}

// The rules written over netlink are the ones nft would write for the same text: nft reads them
// back as that text, so users see and debug them with nft, and Ensure repairs them.
func TestRedirectRulesAsNftReadsThem(t *testing.T) {
	testenv.Root(t, "the test writes nftables rules")
	testenv.Tools(t, "hack/install-node.sh (make node)", "nft")
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	table := "cerulean-redirect-test-" + hex.EncodeToString(b)
	r, err := newRedirect(table, []string{"cni0", "veth+", "+"}, net.IPv4(10, 244, 0, 1), 2579)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "ip", table).Run() })
	if err := r.Install(); err != nil {
		t.Fatal(err)
	}
	list := func() string {
		out, err := exec.Command("nft", "list", "table", "ip", table).CombinedOutput()
		if err != nil {
			t.Fatalf("nft list table: %v: %s", err, out)
		}
		return string(out)
	}
	got := list()
	for _, want := range []string{
		"type nat hook prerouting priority dstnat - 1; policy accept;",
		`iifname "cni0" ip daddr 169.254.169.254 tcp dport 80 dnat to 10.244.0.1:2579 comment "cerulean node agent: pods' IMDS on cni0 to 10.244.0.1:2579"`,
		`iifname "veth*" ip daddr 169.254.169.254 tcp dport 80 dnat to 10.244.0.1:2579 comment`,
		"\t\tip daddr 169.254.169.254 tcp dport 80 dnat to 10.244.0.1:2579 comment \"cerulean node agent: pods' IMDS on + to",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("nft list table lacks %q:\n%s", want, got)
		}
	}
	if changed, err := r.Ensure(); err != nil || changed {
		t.Fatalf("Ensure on intact rules: changed %v, %v", changed, err)
	}
	// A rule deleted by hand, then a rule of someone else's in the agent's chain: each is repaired.
	for _, edit := range []string{
		"flush chain ip " + table + " prerouting",
		"add rule ip " + table + " prerouting ip daddr 169.254.169.254 tcp dport 80 dnat to 10.244.0.1:1",
	} {
		if out, err := exec.Command("nft", strings.Fields(edit)...).CombinedOutput(); err != nil {
			t.Fatalf("nft %s: %v: %s", edit, err, out)
		}
		if changed, err := r.Ensure(); err != nil || !changed {
			t.Fatalf("Ensure after %q: changed %v, %v", edit, changed, err)
		}
		if after := list(); after != got {
			t.Fatalf("after %q and Ensure:\n%s\nwant:\n%s", edit, after, got)
		}
	}
	if err := r.Remove(); err != nil {
		t.Fatal(err)
	}
	if exec.Command("nft", "list", "table", "ip", table).Run() == nil {
		t.Fatal("the table is left after Remove")
	}
	if err := r.Remove(); err != nil {
		t.Fatalf("Remove of an absent table: %v", err)
	}
}

// A connection to IMDS opened while no rule was there (before the agent's start) does not keep
// bypassing the agent: installing forgets its conntrack entry, so its next packet is DNATed (and
// reset) and the client connects again, to the agent. Other connections keep theirs. In a
// network namespace of the test's own, where 169.254.169.254 is a local address.
func TestInstallForgetsConnectionsToIMDS(t *testing.T) {
	testenv.Root(t, "the test makes a network namespace and nftables rules")
	LeaveNetnsDirAsFound(t) // registered first: it runs after the namespace is deleted
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "cer-ct-" + hex.EncodeToString(b)
	for _, args := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", MetadataIP + "/32", "dev", "lo"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
		if args[2] == "add" && args[1] == "netns" {
			t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		}
	}
	f, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := newRedirect("", []string{"cni0"}, net.IPv4(10, 0, 0, 1), 2579)
	if err != nil {
		t.Fatal(err)
	}
	r.netns = int(f.Fd())
	// A first agent: its nat chain turns conntrack on in the namespace.
	if err := r.Install(); err != nil {
		t.Fatal(err)
	}
	// Connections made meanwhile (as if no rule were there): to IMDS and, as a control, to port 81.
	var conns []net.Conn
	for _, port := range []string{"80", "81"} {
		var ln net.Listener
		var c net.Conn
		var lerr, derr error
		if err := RunInNetns(ns, func() {
			if ln, lerr = net.Listen("tcp", net.JoinHostPort(MetadataIP, port)); lerr == nil {
				c, derr = net.Dial("tcp", ln.Addr().String())
			}
		}); err != nil || lerr != nil || derr != nil {
			t.Fatalf("connect to %s:%s in the namespace: %v %v %v", MetadataIP, port, err, lerr, derr)
		}
		t.Cleanup(func() { _ = ln.Close() })
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	tracked := func() map[uint16]bool {
		h, err := netlink.NewHandleAt(netns.NsHandle(r.netns), unix.NETLINK_NETFILTER)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		flows, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		if err != nil {
			t.Fatal(err)
		}
		ports := map[uint16]bool{}
		for _, fl := range flows {
			if fl.Forward.DstIP.Equal(net.ParseIP(MetadataIP)) {
				ports[fl.Forward.DstPort] = true
			}
		}
		return ports
	}
	if got := tracked(); !got[80] || !got[81] {
		t.Fatalf("before the second install, tracked connections to %s by port: %v; want 80 and 81", MetadataIP, got)
	}
	// The next agent.
	if err := r.Install(); err != nil {
		t.Fatal(err)
	}
	if got := tracked(); got[80] || !got[81] {
		t.Fatalf("after the install, tracked connections to %s by port: %v; want 81 only", MetadataIP, got)
	}
}
