package devenv

// EnsureDNSObjects is what a node's start writes for CoreDNS, for the restart test.
var EnsureDNSObjects = ensureDNSObjects
