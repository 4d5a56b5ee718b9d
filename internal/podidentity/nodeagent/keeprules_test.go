package nodeagent_test

import (
	"context"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
	"github.com/cerulean/cerulean/internal/testenv"
)

// An agent told to keep its rules leaves its DNAT when it stops, so that pods' IMDS requests
// are refused until the next agent instead of reaching the node's IMDS; the next agent takes the
// table over with its own port.
func TestKeepRulesOnExit(t *testing.T) {
	testenv.Root(t, "the test writes nftables rules")
	testenv.Tools(t, "hack/install-node.sh (make node)", "nft")
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	table := "cerulean-nmi-k" + tag()
	t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "ip", table).Run() })
	run := func(keep bool) string {
		t.Helper()
		agent, err := nodeagent.New(nodeagent.Options{
			NodeName: "keep-node", Config: cp.RESTConfig, Listen: "127.0.0.1:0", NodeIP: net.IPv4(127, 0, 0, 1),
			// An interface pattern that matches nothing on this machine.
			PodInterfaces: []string{"cvhkeep" + tag() + "+"}, Table: table, KeepRulesOnExit: keep,
			Tokens: &nodeagent.IMDSSource{Endpoint: "http://127.0.0.1:1"}, IMDS: &url.URL{Scheme: "http", Host: "127.0.0.1:1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(nftTable(table), "dnat to "+agent.Addr()) {
			if time.Now().After(deadline) {
				t.Fatalf("the agent on %s installed no DNAT to itself:\n%s", agent.Addr(), nftTable(table))
			}
			time.Sleep(100 * time.Millisecond)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return agent.Addr()
	}
	first := run(true)
	if got := nftTable(table); !strings.Contains(got, "dnat to "+first) {
		t.Fatalf("after the agent kept its rules and stopped: %q, want its DNAT", got)
	}
	second := run(false)
	if got := nftTable(table); got != "" {
		t.Fatalf("after an agent that keeps nothing stopped (it took over from %s as %s): %q", first, second, got)
	}
}

// nftTable is nft's listing of an ip table, empty when there is none.
func nftTable(name string) string {
	out, err := exec.Command("nft", "list", "table", "ip", name).Output()
	if err != nil {
		return ""
	}
	return string(out)
}
