package up

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

// nodeAgent is the pod-identity node agent of the local node, run in this process.
type nodeAgent struct {
	addr    string
	metrics string // the URL of its Prometheus metrics
	stop    context.CancelFunc
	done    chan struct{} // closed when Run has returned; err is its result
	err     error
	log     *os.File
}

// scaleSetOf is the scale set of a VMSS instance's providerID (azure:///subscriptions/…/virtualMachines/N).
func scaleSetOf(providerID string) (string, error) {
	id, ok := strings.CutPrefix(providerID, "azure://")
	if i := strings.LastIndex(id, "/virtualMachines/"); ok && i > 0 {
		return id[:i], nil
	}
	return "", fmt.Errorf("providerID %q names no scale set instance", providerID)
}

// scaleSetIMDS is the local cloud's IMDS-style endpoint with the identity header of the node's
// scale set (from its providerID): what code on an Azure node reaches at 169.254.169.254.
func scaleSetIMDS(az *cloud.Cloud, providerID string) (*nodeagent.IMDSSource, error) {
	scaleSet, err := scaleSetOf(providerID)
	if err != nil {
		return nil, err
	}
	pairs, err := msi.ComputeEnv(az.Settings().DataDir, scaleSet)
	if err != nil {
		return nil, err
	}
	header := ""
	for _, p := range pairs {
		if p[0] == "IDENTITY_HEADER" {
			header = p[1]
		}
	}
	transport := az.Transport()
	transport.Proxy = nil // IMDS is never reached through a proxy
	return &nodeagent.IMDSSource{Endpoint: az.Settings().URL, Header: header, Client: &http.Client{Transport: transport, Timeout: 30 * time.Second}}, nil
}

// startNodeAgent runs the node agent for node: it serves on the node's address (the pods'
// gateway), DNATs pods' 169.254.169.254:80 on the node's bridge to itself, and gets tokens from
// the local cloud's IMDS-style endpoint for the node's scale set. Stop removes its rules.
func startNodeAgent(ctx context.Context, cp *devenv.ControlPlane, az *cloud.Cloud, node *devenv.Node, providerID, dataDir string) (*nodeAgent, error) {
	s := az.Settings()
	imds, err := scaleSetIMDS(az, providerID)
	if err != nil {
		return nil, fmt.Errorf("start node agent: %w", err)
	}
	endpoint, err := url.Parse(s.URL)
	if err != nil {
		return nil, fmt.Errorf("start node agent: parse the local cloud's URL: %w", err)
	}
	nodeIP := net.ParseIP(node.IP)
	if nodeIP == nil {
		return nil, fmt.Errorf("start node agent: node address %q is not an IP address", node.IP)
	}
	logFile, err := os.OpenFile(filepath.Join(dataDir, "logs", "node-agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the node agent's log: %w", err)
	}
	a, err := nodeagent.New(nodeagent.Options{
		NodeName: node.Name, Config: cp.RESTConfig, Listen: net.JoinHostPort(node.IP, "0"),
		NodeIP: nodeIP, PodInterfaces: []string{devenv.Bridge},
		Tokens: imds,
		IMDS:   endpoint, IMDSHeader: imds.Header, IMDSTransport: imds.Client.Transport,
		Entra:       azcore.ClientOptions{Cloud: azcloud.Configuration{ActiveDirectoryAuthorityHost: s.AuthorityHost}, Transport: &http.Client{Transport: az.Transport()}},
		Logger:      slog.New(slog.NewJSONHandler(logFile, nil)),
		MetricsAddr: "127.0.0.1:0",
	})
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	na := &nodeAgent{addr: a.Addr(), metrics: "http://" + a.MetricsAddr() + "/metrics", stop: stop, done: make(chan struct{}), log: logFile}
	go func() {
		na.err = a.Run(runCtx)
		close(na.done)
	}()
	return na, nil
}

// Exited is closed when the agent has stopped; Stop then returns why.
func (na *nodeAgent) Exited() <-chan struct{} { return na.done }

// Stop ends the agent and waits until its DNAT rules are removed; an error it stopped
// with on its own was already reported.
func (na *nodeAgent) Stop() error {
	select {
	case <-na.done:
		_ = na.log.Close()
		return nil
	default:
	}
	na.stop()
	<-na.done
	_ = na.log.Close()
	if na.err != nil {
		return fmt.Errorf("node agent: %w", na.err)
	}
	return nil
}
