//go:build tools

// Package tools pins the upstream Secrets Store CSI Driver, built unmodified into
// bin/secrets-store-csi-driver: the local node runs it beside the kubelet, and the node test
// mounts Key Vault secrets into a pod through it and `cerulean csi-provider`. The module proxy
// refuses monis.app/mlog, which the driver imports; go.mod replaces it with the shim in ../mlog.
package tools

import _ "sigs.k8s.io/secrets-store-csi-driver/cmd/secrets-store-csi-driver"
