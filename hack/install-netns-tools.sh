#!/usr/bin/env bash
# Installs ip (iproute2) and iptables from Debian's packages for the pod-identity network-path
# test (internal/nodeagent's TestPodIdentityThroughTheNetworkPath), which runs as root and makes
# network namespaces, veth pairs and iptables rules. Does nothing when both are on PATH; the test
# skips with the reason when they are missing or it is not root.
set -euo pipefail

export PATH="$PATH:/usr/sbin:/sbin"
if command -v ip >/dev/null 2>&1 && command -v iptables >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "ip or iptables missing and not root: the pod-identity network test will skip" >&2
	exit 0
fi
echo "installing iproute2 and iptables from Debian's packages (first run only)…" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 iptables >/dev/null
