package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/client-go/tools/clientcmd"
)

// CommandOptions are the flags of `cerulean node-agent`.
type CommandOptions struct {
	NodeName           string
	Kubeconfig         string // empty: in-cluster config
	Listen             string
	NodeIP             string
	PodInterfaces      []string
	Table              string // the agent's nftables table
	KeepRulesOnExit    bool
	IMDSEndpoint       string // the node's managed-identity endpoint (IMDS, or the local cloud's)
	IdentityHeaderFile string // file holding the local cloud's identity header of the node's VM/VMSS
	CAFile             string // CA of the endpoint and of Entra ID (local cloud)
	AuthorityHost      string // Entra ID for service-principal identities; empty: Azure's public cloud
	AssignWait         time.Duration
	MetricsAddr        string // empty: no metrics endpoint
	Logger             *slog.Logger
}

// RunCommand builds an agent from the command's options and runs it until ctx ends.
func RunCommand(ctx context.Context, c CommandOptions) error {
	if c.NodeName == "" {
		return errors.New("run node agent: --node-name (or $NODE_NAME) is required")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	endpoint, err := url.Parse(c.IMDSEndpoint)
	if err != nil || endpoint.Host == "" {
		return fmt.Errorf("parse --imds-endpoint %q: not a URL", c.IMDSEndpoint)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // IMDS is never reached through a proxy
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("read CA file %s: no PEM certificate", c.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	// Entra ID is reached like any Azure endpoint: through the environment's proxy, if any.
	entraTransport := transport.Clone()
	entraTransport.Proxy = http.ProxyFromEnvironment
	entra := azcore.ClientOptions{Transport: &http.Client{Transport: entraTransport}}
	entra.Cloud.ActiveDirectoryAuthorityHost = c.AuthorityHost
	header := ""
	if c.IdentityHeaderFile != "" {
		b, err := os.ReadFile(c.IdentityHeaderFile)
		if err != nil {
			return fmt.Errorf("read identity header file: %w", err)
		}
		header = strings.TrimSpace(string(b))
	}
	var nodeIP net.IP
	if len(c.PodInterfaces) > 0 {
		if nodeIP = net.ParseIP(c.NodeIP); nodeIP == nil {
			return fmt.Errorf("parse --node-ip %q: not an IP address (needed for the DNAT rules)", c.NodeIP)
		}
	}
	a, err := New(Options{
		NodeName: c.NodeName, Config: cfg, Listen: c.Listen, NodeIP: nodeIP, PodInterfaces: c.PodInterfaces, Table: c.Table, KeepRulesOnExit: c.KeepRulesOnExit,
		Tokens: &IMDSSource{Endpoint: c.IMDSEndpoint, Header: header, Client: &http.Client{Transport: transport, Timeout: 30 * time.Second}},
		IMDS:   endpoint, IMDSHeader: header, IMDSTransport: transport, AssignWait: c.AssignWait, Logger: c.Logger, Entra: entra, MetricsAddr: c.MetricsAddr,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
