package nodeagent

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
)

// DefaultChain is the node agent's own chain in the nat table; PREROUTING jumps to it.
const DefaultChain = "CERULEAN-NMI"

// MetadataIP is the instance-metadata address pods ask.
const MetadataIP = "169.254.169.254"

// rules installs and removes the DNAT of 169.254.169.254:80 from pod interfaces to the agent.
type rules struct {
	iptables   string // the iptables binary
	chain      string
	interfaces []string
	target     string // ip:port
}

func newRules(bin, chain string, interfaces []string, ip net.IP, port int) *rules {
	if bin == "" {
		bin = "iptables"
	}
	if chain == "" {
		chain = DefaultChain
	}
	return &rules{iptables: bin, chain: chain, interfaces: interfaces, target: net.JoinHostPort(ip.String(), strconv.Itoa(port))}
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

func (r *rules) jump() []string {
	return []string{"-j", r.chain, "-m", "comment", "--comment", "cerulean node agent"}
}

// Ensure creates the chain, its rules and PREROUTING's jump when any is missing; it leaves
// rules that are present alone, so that there is no moment without them.
func (r *rules) Ensure(ctx context.Context) (changed bool, err error) {
	if r.run(ctx, "-S", r.chain) != nil {
		if err := r.run(ctx, "-N", r.chain); err != nil {
			return false, fmt.Errorf("create chain: %w", err)
		}
		changed = true
	}
	for _, iface := range r.interfaces {
		spec := r.dnat(iface)
		if r.run(ctx, append([]string{"-C", r.chain}, spec...)...) == nil {
			continue
		}
		if err := r.run(ctx, append([]string{"-A", r.chain}, spec...)...); err != nil {
			return changed, fmt.Errorf("add DNAT rule: %w", err)
		}
		changed = true
	}
	if r.run(ctx, append([]string{"-C", "PREROUTING"}, r.jump()...)...) != nil {
		if err := r.run(ctx, append([]string{"-I", "PREROUTING", "1"}, r.jump()...)...); err != nil {
			return changed, fmt.Errorf("add PREROUTING jump: %w", err)
		}
		changed = true
	}
	return changed, nil
}

// Remove deletes the jump and the chain; absent parts are no error.
func (r *rules) Remove(ctx context.Context) error {
	for r.run(ctx, append([]string{"-D", "PREROUTING"}, r.jump()...)...) == nil {
	}
	if r.run(ctx, "-S", r.chain) != nil {
		return nil
	}
	if err := r.run(ctx, "-F", r.chain); err != nil {
		return fmt.Errorf("flush chain: %w", err)
	}
	if err := r.run(ctx, "-X", r.chain); err != nil {
		return fmt.Errorf("delete chain: %w", err)
	}
	return nil
}
