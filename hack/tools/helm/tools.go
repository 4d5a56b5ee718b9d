//go:build tools

// Package tools pins helm, built into bin/ by hack/tools/build.sh.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
