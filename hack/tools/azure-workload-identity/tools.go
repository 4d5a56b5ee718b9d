//go:build tools

// Package tools pins the upstream Azure Workload Identity webhook, built only for `make bench`
// (the benchmark compares Cerulean's webhook with it on the same kube-apiserver).
package tools

import _ "github.com/Azure/azure-workload-identity/cmd/webhook"
