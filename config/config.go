// Package config embeds the generated manifests the binary installs itself (the CRDs, under
// `cerulean-local up`).
package config

import "embed"

// CRDs holds crd/bases/*.yaml, as `make generate` writes them.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS
