package devenv

// The node's network on the machine: the bridge with the node's address, the iptables rules that
// keep pod traffic here, and their removal.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// checkSubnetFree fails when the pod network overlaps a route this machine already has.
func checkSubnetFree() error {
	out, err := run("ip", "-4", "-o", "route", "show", "table", "all")
	if err != nil {
		return fmt.Errorf("check the pod network: %w", err)
	}
	_, ours, _ := net.ParseCIDR(ClusterCIDR)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || slices.Contains(f, Bridge) {
			continue
		}
		dst := f[0]
		if dst == "default" || dst == "broadcast" || dst == "local" || dst == "unreachable" {
			if len(f) < 2 || dst == "default" {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		_, n, err := net.ParseCIDR(dst)
		if err != nil || n.IP.IsLoopback() {
			continue
		}
		if n.Contains(ours.IP) || ours.Contains(n.IP) {
			return fmt.Errorf("the pod network %s overlaps this machine's route %q: the local node needs it free", ClusterCIDR, strings.TrimSpace(line))
		}
	}
	return nil
}

// setupNetwork creates the bridge with the node's address and the iptables rules that keep pod
// traffic on this machine and away from the kubelet's port.
func setupNetwork(kubeletPort int) error {
	if _, err := run("ip", "link", "add", Bridge, "type", "bridge"); err != nil {
		return fmt.Errorf("create bridge: %w", err)
	}
	if _, err := run("ip", "addr", "add", NodeIP+"/24", "dev", Bridge); err != nil {
		return fmt.Errorf("create bridge: %w", err)
	}
	if _, err := run("ip", "link", "set", Bridge, "up"); err != nil {
		return fmt.Errorf("create bridge: %w", err)
	}
	rules := [][]string{
		{"-N", forwardChain},
		// Pod traffic goes to other pods and to this machine only: nothing is masqueraded, and
		// this makes it certain that no packet of a pod leaves, nor enters from outside.
		{"-A", forwardChain, "-s", ClusterCIDR, "!", "-o", Bridge, "-j", "DROP"},
		{"-A", forwardChain, "-d", ClusterCIDR, "!", "-i", Bridge, "-j", "DROP"},
		{"-I", "FORWARD", "1", "-j", forwardChain},
		{"-N", inputChain},
		// Pods must not call the kubelet's API; kube-apiserver does, over loopback.
		{"-A", inputChain, "-i", Bridge, "-p", "tcp", "--dport", strconv.Itoa(kubeletPort), "-j", "DROP"},
		{"-I", "INPUT", "1", "-j", inputChain},
	}
	for _, r := range rules {
		if _, err := run("iptables", append([]string{"-w", "5"}, r...)...); err != nil {
			return fmt.Errorf("add iptables rule: %w", err)
		}
	}
	return nil
}

// removeNetwork deletes the veths on the bridge, the bridge and the iptables rules.
func removeNetwork() error {
	var errs []error
	if out, err := run("ip", "-o", "link", "show", "master", Bridge); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if _, err := run("ip", "link", "del", name); err != nil && linkExists(name) {
				errs = append(errs, err)
			}
		}
	}
	if linkExists(Bridge) {
		if _, err := run("ip", "link", "del", Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	for _, jump := range [][2]string{{"FORWARD", forwardChain}, {"INPUT", inputChain}} {
		for range 10 { // a jump added twice is removed twice
			if _, err := run("iptables", "-w", "5", "-D", jump[0], "-j", jump[1]); err != nil {
				break
			}
		}
		if _, err := run("iptables", "-w", "5", "-S", jump[1]); err == nil {
			if _, err := run("iptables", "-w", "5", "-F", jump[1]); err != nil {
				errs = append(errs, err)
			}
			if _, err := run("iptables", "-w", "5", "-X", jump[1]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, jump := range natJumps {
		for range 10 {
			if _, err := run("iptables", append([]string{"-w", "5", "-t", "nat", "-D"}, jump...)...); err != nil {
				break
			}
		}
	}
	if _, err := run("iptables", "-w", "5", "-t", "nat", "-S", natChain); err == nil {
		if _, err := run("iptables", "-w", "5", "-t", "nat", "-F", natChain); err != nil {
			errs = append(errs, err)
		}
		if _, err := run("iptables", "-w", "5", "-t", "nat", "-X", natChain); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}
