// Package integration holds the ARM tests that drive an in-process local cloud (and a child
// `cerulean-local cloud` process) with the real Azure SDK for Go clients.
package integration
