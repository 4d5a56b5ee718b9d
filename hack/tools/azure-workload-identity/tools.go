//go:build tools

// Package tools pins the upstream Azure Workload Identity module: its webhook, built only for
// `make bench` (the benchmark compares Cerulean's webhook with it on the same kube-apiserver),
// and its proxy, which `make images` builds into the proxy sidecar's image for the local node
// (internal/images; the proxy-init image takes the module's init/init-iptables.sh).
package tools

import (
	_ "github.com/Azure/azure-workload-identity/cmd/proxy"
	_ "github.com/Azure/azure-workload-identity/cmd/webhook"
)
