// Package version holds the build's version and commit, stamped by the Makefile.
package version

// Set with -ldflags -X at build time.
var (
	Version = "dev"
	Commit  = "unknown"
)
