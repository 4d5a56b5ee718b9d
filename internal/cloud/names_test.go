package cloud_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/miekg/dns"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// query asks the cloud's DNS server one question and returns the answer.
func query(t *testing.T, server, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	in, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(m, server)
	if err != nil {
		t.Fatalf("query %s: %v", name, err)
	}
	return in
}

func wantA(t *testing.T, server, name, addr string) {
	t.Helper()
	in := query(t, server, name, dns.TypeA)
	if in.Rcode != dns.RcodeSuccess || len(in.Answer) != 1 {
		t.Fatalf("%s: rcode %s, answers %v; want one A %s", name, dns.RcodeToString[in.Rcode], in.Answer, addr)
	}
	if a, ok := in.Answer[0].(*dns.A); !ok || a.A.String() != addr {
		t.Fatalf("%s: answer %v, want A %s", name, in.Answer[0], addr)
	}
}

func wantRcode(t *testing.T, server, name string, rcode int) {
	t.Helper()
	if in := query(t, server, name, dns.TypeA); in.Rcode != rcode || len(in.Answer) != 0 {
		t.Fatalf("%s: rcode %s, answers %v; want %s", name, dns.RcodeToString[in.Rcode], in.Answer, dns.RcodeToString[rcode])
	}
}

// TestAzureNamesByDNS: the cloud's DNS answers the names it serves with its HTTPS front's
// address (a data plane's with its own: internal/cloud/arm/dataplanes), NXDOMAIN for the rest of Azure's zones and for a vault
// once deleted, and refuses other zones. The Azure SDK for Go, with public-cloud defaults and
// only the CA and a resolver pointed at that DNS, reads a secret under the vault's public name.
func TestAzureNamesByDNS(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{DataDir: t.TempDir(), ProxyAddr: "0", ARM: cloudtest.FastARM()})
	front, err := net.Listen("tcp", "127.0.0.1:0") // find a free port for the front
	if err != nil {
		t.Fatal(err)
	}
	frontAddr := front.Addr().String()
	_ = front.Close()
	if err := c.ServeHTTPSOn(frontAddr); err != nil {
		t.Fatal(err)
	}
	server, err := c.ServeDNSOn("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	wantA(t, server, "login.microsoftonline.com", "127.0.0.1")
	wantA(t, server, "Management.Azure.com.", "127.0.0.1")
	wantRcode(t, server, "pg2.postgres.database.azure.com", dns.RcodeNameError)
	wantRcode(t, server, "kvnames1.vault.azure.net", dns.RcodeNameError)
	wantRcode(t, server, "nothing.blob.core.windows.net", dns.RcodeNameError)
	wantRcode(t, server, "example.com", dns.RcodeRefused)
	if in := query(t, server, "login.microsoftonline.com", dns.TypeAAAA); in.Rcode != dns.RcodeSuccess || len(in.Answer) != 0 {
		t.Errorf("AAAA login.microsoftonline.com: rcode %s, answers %v; want no data", dns.RcodeToString[in.Rcode], in.Answer)
	}

	s := c.Settings()
	owner := cloudtest.OwnerCred(t, c)
	vaults, err := armkeyvault.NewVaultsClient(s.SubscriptionID, owner, cloudtest.ARMOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	cloudtest.CreateGroup(t, c, owner, cloudtest.ARMOptions(c), "westeurope", "rg-names")
	poller, err := vaults.BeginCreateOrUpdate(t.Context(), "rg-names", "kvnames1", armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("westeurope"), Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(s.TenantID),
			SKU:      &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			AccessPolicies: []*armkeyvault.AccessPolicyEntry{{
				TenantID: to.Ptr(s.TenantID), ObjectID: to.Ptr(s.ObjectID),
				Permissions: &armkeyvault.Permissions{Secrets: []*armkeyvault.SecretPermissions{to.Ptr(armkeyvault.SecretPermissionsAll)}},
			}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.PollUntilDone(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	wantA(t, server, "kvnames1.vault.azure.net", "127.0.0.1")

	// The pod's view: names resolve through the cloud's DNS, port 443 is the front's port.
	_, frontPort, _ := net.SplitHostPort(frontAddr)
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
	pool := c.Transport().TLSClientConfig.RootCAs // the cloud's CA only
	transport := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			ips, err := resolver.LookupHost(ctx, host)
			if err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(ips[0], frontPort))
		},
	}
	opts := azcore.ClientOptions{Transport: &http.Client{Transport: transport}, Retry: policy.RetryOptions{MaxRetries: -1}}
	cred, err := azidentity.NewClientSecretCredential(s.TenantID, s.ClientID, s.ClientSecret, &azidentity.ClientSecretCredentialOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := azsecrets.NewClient("https://kvnames1.vault.azure.net/", cred, &azsecrets.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.SetSecret(t.Context(), "db-password", azsecrets.SetSecretParameters{Value: to.Ptr("v1")}, nil); err != nil {
		t.Fatalf("set secret under the public name: %v", err)
	}
	got, err := secrets.GetSecret(t.Context(), "db-password", "", nil)
	if err != nil || got.Value == nil || *got.Value != "v1" {
		t.Fatalf("get secret under the public name: %v", err)
	}

	// A name the cloud does not serve gets no certificate, whatever the client asks.
	conn, err := tls.Dial("tcp", frontAddr, &tls.Config{ServerName: "example.com", RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err == nil {
		_ = conn.Close()
		t.Error("the front completed a handshake for example.com")
	}

	if _, err := vaults.Delete(t.Context(), "rg-names", "kvnames1", nil); err != nil {
		t.Fatal(err)
	}
	wantRcode(t, server, "kvnames1.vault.azure.net", dns.RcodeNameError)
}
