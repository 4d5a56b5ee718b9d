#!/usr/bin/env bash
# Installs what the local node needs from Debian's packages (runc, the CNI plugins, iptables,
# nftables) and checks the kernel features it uses. containerd, the kubelet and kube-scheduler are built by
# hack/tools/build.sh (`make node` does both). Needs root: the node creates a bridge, iptables
# rules, mounts and cgroups.
set -euo pipefail

fail() {
	echo "make node: $*" >&2
	exit 1
}

if [ "$(id -u)" -ne 0 ]; then
	fail "the local node needs root (it creates a bridge, iptables rules, mounts and cgroups); run as root, or use \`cerulean-local up --no-node\`"
fi

missing=()
[ -x /usr/sbin/runc ] || command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
# kube-proxy (nftables mode) drives nft; the node agent writes its rules over netlink, and nft is
# how people (and the tests) read them.
command -v nft >/dev/null 2>&1 || missing+=(nftables)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing ${missing[*]} from Debian's packages (first run only, under a minute)…" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Kernel features, each with what to do when it is missing.
if ! grep -qw overlay /proc/filesystems; then
	modprobe overlay 2>/dev/null || true
	grep -qw overlay /proc/filesystems || fail "the kernel has no overlay filesystem (containerd's snapshotter needs it): load the overlay module"
fi
if [ ! -d /sys/fs/cgroup/cpu ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
	fail "no cgroup hierarchy with the cpu controller under /sys/fs/cgroup: the kubelet needs cgroups"
fi
if [ ! -d /sys/class/net ] || [ ! -w /proc/sys/net/ipv4/ip_forward ]; then
	fail "IPv4 forwarding cannot be set (/proc/sys/net/ipv4/ip_forward): the pod network needs it"
fi
# Bridges and veth pairs may be built in or modules: create one of each (and remove it) to know.
for kind in bridge veth; do
	link=cer-chk-$kind
	extra=()
	[ "$kind" = veth ] && extra=(peer name cer-chk-peer)
	modprobe "$kind" 2>/dev/null || true
	if ! ip link add "$link" type "$kind" "${extra[@]}" 2>/dev/null; then
		fail "the kernel cannot create a $kind link (module $kind): the pod network needs it"
	fi
	ip link del "$link"
done
iptables -w 5 -S >/dev/null 2>&1 || fail "iptables does not work here ($(iptables -w 5 -S 2>&1 | head -1)): the node keeps pod traffic on this machine with it"
nft list tables >/dev/null 2>&1 || fail "nftables does not work here ($(nft list tables 2>&1 | head -1)): kube-proxy routes Services and the node agent sends pods' 169.254.169.254 to itself with nftables rules (kernel module nf_tables)"
