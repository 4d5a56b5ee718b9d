//go:build tools

// Package tools pins controller-gen, built into bin/ by hack/tools/build.sh.
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
