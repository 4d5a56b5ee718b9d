// Command coredns is CoreDNS, pinned by this module, with the plugins the local node's Corefile
// uses (internal/devenv): a custom build as CoreDNS documents it (its plugin.cfg), which leaves
// out the cloud providers' plugins and their SDKs. Every plugin and the server are CoreDNS's own.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
