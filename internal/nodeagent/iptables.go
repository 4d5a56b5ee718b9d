package nodeagent

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
)

// Chain is the node agent's own chain in the nat table; PREROUTING jumps to it.
const Chain = "CERULEAN-NMI"

// MetadataIP is the instance-metadata address pods ask.
const MetadataIP = "169.254.169.254"

// rules installs and removes the DNAT of 169.254.169.254:80 from pod interfaces to the agent.
type rules struct {
	iptables   string // the iptables binary
	interfaces []string
	target     string // ip:port
}

func newRules(bin string, interfaces []string, ip net.IP, port int) *rules {
	if bin == "" {
		bin = "iptables"
	}
	return &rules{iptables: bin, interfaces: interfaces, target: net.JoinHostPort(ip.String(), strconv.Itoa(port))}
}

func (r *rules) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, r.iptables, append([]string{"-w", "5", "-t", "nat"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("iptables %v: %w: %s", args, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

func (r *rules) dnat(iface string) []string {
	return []string{"-i", iface, "-d", MetadataIP + "/32", "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", r.target,
		"-m", "comment", "--comment", "cerulean node agent: pod IMDS to the agent"}
}

var jump = []string{"-j", Chain, "-m", "comment", "--comment", "cerulean node agent"}

// Ensure creates the chain, its rules and PREROUTING's jump when any is missing; it leaves
// rules that are present alone, so that there is no moment without them.
func (r *rules) Ensure(ctx context.Context) (changed bool, err error) {
	if r.run(ctx, "-S", Chain) != nil {
		if err := r.run(ctx, "-N", Chain); err != nil {
			return false, fmt.Errorf("create chain: %w", err)
		}
		changed = true
	}
	for _, iface := range r.interfaces {
		spec := r.dnat(iface)
		if r.run(ctx, append([]string{"-C", Chain}, spec...)...) == nil {
			continue
		}
		if err := r.run(ctx, append([]string{"-A", Chain}, spec...)...); err != nil {
			return changed, fmt.Errorf("add DNAT rule: %w", err)
		}
		changed = true
	}
	if r.run(ctx, append([]string{"-C", "PREROUTING"}, jump...)...) != nil {
		if err := r.run(ctx, append([]string{"-I", "PREROUTING", "1"}, jump...)...); err != nil {
			return changed, fmt.Errorf("add PREROUTING jump: %w", err)
		}
		changed = true
	}
	return changed, nil
}

// Remove deletes the jump and the chain; absent parts are no error.
func (r *rules) Remove(ctx context.Context) error {
	for r.run(ctx, append([]string{"-D", "PREROUTING"}, jump...)...) == nil {
	}
	if r.run(ctx, "-S", Chain) != nil {
		return nil
	}
	if err := r.run(ctx, "-F", Chain); err != nil {
		return fmt.Errorf("flush chain: %w", err)
	}
	if err := r.run(ctx, "-X", Chain); err != nil {
		return fmt.Errorf("delete chain: %w", err)
	}
	return nil
}
