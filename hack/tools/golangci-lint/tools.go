//go:build tools

// Package tools pins golangci-lint, built into bin/ by hack/tools/build.sh.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
