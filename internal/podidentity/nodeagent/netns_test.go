package nodeagent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
	"github.com/cerulean/cerulean/internal/testenv"
)

// The test's network: pods are network namespaces with a veth pair to the host, in
// 10.251.0.0/16, which exists only inside the test; the node's address is on a host-only veth.
// Everything carries the run's random tag and is removed when the test ends.

// needRoot skips the test unless it runs as root with ip and nft (the observer of the agent's rules).
func needRoot(t *testing.T) {
	t.Helper()
	testenv.Root(t, "the test creates network namespaces, veth pairs and nftables rules")
	testenv.Tools(t, "hack/install-node.sh (make node)", "ip", "nft")
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		testenv.Missing(t, "ip netns unavailable: %v: %s", err, out)
	}
	nodeagent.LeaveNetnsDirAsFound(t)
}

func tag() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func run(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// nft applies a ruleset given in nft's syntax.
func nft(t testing.TB, ruleset string) {
	t.Helper()
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v: %s\n%s", err, out, ruleset)
	}
}

// network is the test's node: a dummy interface with the node's address, and pods.
type network struct {
	t      *testing.T
	tag    string
	nodeIP net.IP
	table  string
	pods   int
}

// newNetwork makes the node's side; when the test ends, after everything is removed, it fails
// the test if anything of it (or of its table) is left.
func newNetwork(t *testing.T, tablePrefix string) *network {
	n := &network{t: t, tag: tag(), nodeIP: net.IPv4(10, 251, 255, 1)}
	n.table = tablePrefix + n.tag
	t.Cleanup(func() {
		if left := leftovers(n.tag, n.table); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	dummy := "cnd" + n.tag
	// A veth pair with both ends on the host: the node's address lives on one end (no dummy
	// interface module is needed).
	run(t, "ip", "link", "add", dummy, "type", "veth", "peer", "name", "cnp"+n.tag)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", dummy).Run() })
	run(t, "ip", "addr", "add", n.nodeIP.String()+"/32", "dev", dummy)
	run(t, "ip", "link", "set", dummy, "up")
	return n
}

// ifacePattern matches the host ends of this network's veth pairs (iptables -i).
func (n *network) ifacePattern() string { return "cvh" + n.tag + "+" }

// netPod is a network namespace standing for a pod.
type netPod struct {
	ns string
	ip net.IP
}

// addPod creates a namespace with eth0 at 10.251.N.2/30, its host end at 10.251.N.1, and a
// default route through it.
func (n *network) addPod() *netPod {
	t := n.t
	n.pods++
	i := n.pods
	p := &netPod{ns: fmt.Sprintf("cer-%s-%d", n.tag, i), ip: net.IPv4(10, 251, byte(i), 2)}
	host := fmt.Sprintf("cvh%s%d", n.tag, i)
	run(t, "ip", "netns", "add", p.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.ns).Run() })
	run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", p.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run(t, "ip", "addr", "add", fmt.Sprintf("10.251.%d.1/30", i), "dev", host)
	run(t, "ip", "link", "set", host, "up")
	run(t, "ip", "-n", p.ns, "addr", "add", p.ip.String()+"/30", "dev", "eth0")
	run(t, "ip", "-n", p.ns, "link", "set", "eth0", "up")
	run(t, "ip", "-n", p.ns, "link", "set", "lo", "up")
	run(t, "ip", "-n", p.ns, "route", "add", "default", "via", fmt.Sprintf("10.251.%d.1", i))
	return p
}

// exec runs this test binary inside the pod's namespace as a helper (see TestMain) with env.
func (p *netPod) exec(t *testing.T, env ...string) (string, string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", p.ns, self, "-test.run=^$")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return stdout.String(), stderr.String(), err
}

// forward makes addr (127.0.0.1:PORT, e.g. a vault of the local cloud) reachable inside the
// pod's namespace at the same address: a listener opened in the namespace forwards each
// connection to addr on the host. Only the vault is forwarded; IMDS goes the real way.
func (p *netPod) forward(t *testing.T, addr string) {
	t.Helper()
	ln, err := listenIn(p.ns, addr)
	if err != nil {
		t.Fatalf("listen in %s: %v", p.ns, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			})
		}
	})
}

// listenIn opens a TCP listener inside network namespace ns.
func listenIn(ns, addr string) (ln net.Listener, err error) {
	if nerr := nodeagent.RunInNetns(ns, func() { ln, err = net.Listen("tcp", addr) }); nerr != nil {
		return nil, nerr
	}
	return ln, err
}

// leftovers lists what of this network (namespaces, links, the agent's nftables table) still exists.
func leftovers(tagStr, table string) []string {
	var out []string
	if b, err := exec.Command("ip", "netns", "list").Output(); err == nil && strings.Contains(string(b), tagStr) {
		out = append(out, "netns: "+strings.TrimSpace(string(b)))
	}
	if b, err := exec.Command("ip", "-o", "link").Output(); err == nil && strings.Contains(string(b), tagStr) {
		out = append(out, "links with "+tagStr)
	}
	if exec.Command("nft", "list", "table", "ip", table).Run() == nil {
		out = append(out, "nftables: table "+table)
	}
	return out
}
