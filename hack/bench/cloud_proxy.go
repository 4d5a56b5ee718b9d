package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
)

func init() {
	register(section{title: "Local cloud: through the proxy for Azure's public names", run: benchCloudProxy})
}

// benchCloudProxy measures a token request and an ARM GET through the proxy (CONNECT to
// login.microsoftonline.com / management.azure.com, TLS terminated by the proxy, the cloud's
// handlers in-process) against the same request to the cloud's loopback address, in one run,
// at 1 and 8 concurrent clients with keep-alive connections (an SDK keeps its tunnel open), and
// with a new connection (and tunnel) for every request.
func benchCloudProxy(ctx context.Context, env benchEnv) ([]row, error) {
	c, err := startCloud(ctx, env, "cloud-proxy", cloud.Options{ProxyAddr: "0"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	proxyURL, err := url.Parse(s.ProxyURL)
	if err != nil {
		return nil, err
	}
	direct, dtr := loadClient(c)
	defer dtr.CloseIdleConnections()
	viaProxy, ptr := loadClient(c)
	ptr.Proxy = http.ProxyURL(proxyURL)
	defer ptr.CloseIdleConnections()

	scope := "https://management.core.windows.net//.default"
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {s.ClientSecret}, "scope": {scope}}.Encode()
	formHeader := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	token := func(hc *http.Client, base string) func(context.Context) error {
		return func(ctx context.Context) error {
			status, err := send(ctx, hc, http.MethodPost, base+"/"+s.TenantID+"/oauth2/v2.0/token", form, formHeader)
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("token endpoint answered %d", status)
			}
			return err
		}
	}
	cred, err := ownerCred(c, c.ClientOptions())
	if err != nil {
		return nil, err
	}
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		return nil, err
	}
	auth := map[string]string{"Authorization": "Bearer " + tok.Token}
	armGet := func(hc *http.Client, base string) func(context.Context) error {
		return func(ctx context.Context) error {
			status, err := send(ctx, hc, http.MethodGet, base+"/subscriptions/"+s.SubscriptionID+"?api-version=2022-12-01", "", auth)
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("ARM answered %d", status)
			}
			return err
		}
	}
	const login, management = "https://login.microsoftonline.com", "https://management.azure.com"
	// Warm up: connections and tunnels open, certificates issued.
	for _, f := range []func(context.Context) error{token(direct, s.URL), token(viaProxy, login), armGet(direct, s.URL), armGet(viaProxy, management)} {
		if err := f(ctx); err != nil {
			return nil, fmt.Errorf("warm up: %w", err)
		}
	}
	var rows []row
	for _, conc := range []int{1, 8} {
		total := min(300*conc, 2000)
		for _, b := range []struct {
			name           string
			direct, proxed func(context.Context) error
		}{
			{"token (client secret)", token(direct, s.URL), token(viaProxy, login)},
			{"ARM GET subscription", armGet(direct, s.URL), armGet(viaProxy, management)},
		} {
			d := benchutil.Load(ctx, conc, total, 20*time.Second, b.direct)
			p := benchutil.Load(ctx, conc, total, 20*time.Second, b.proxed)
			rows = append(rows,
				row{benchmark: fmt.Sprintf("%s, direct, %d concurrent", b.name, conc), result: d.String()},
				row{benchmark: fmt.Sprintf("%s, through the proxy, %d concurrent", b.name, conc), result: p.String(),
					vsBaseline: fmt.Sprintf("p50 %s, p99 %s of direct", ratio(float64(p.P50), float64(d.P50)), ratio(float64(p.P99), float64(d.P99)))},
			)
		}
	}
	// A new connection for every request: the proxy's CONNECT and its TLS handshake (with a
	// cached leaf) against a direct TLS handshake.
	coldDirect, cdtr := loadClient(c)
	cdtr.DisableKeepAlives = true
	coldProxy, cptr := loadClient(c)
	cptr.DisableKeepAlives, cptr.Proxy = true, http.ProxyURL(proxyURL)
	d := benchutil.Load(ctx, 1, 300, 20*time.Second, armGet(coldDirect, s.URL))
	p := benchutil.Load(ctx, 1, 300, 20*time.Second, armGet(coldProxy, management))
	rows = append(rows,
		row{benchmark: "ARM GET subscription, direct, new connection each request", result: d.String()},
		row{benchmark: "ARM GET subscription, through the proxy, new tunnel each request", result: p.String(),
			vsBaseline: fmt.Sprintf("p50 %s, p99 %s of direct", ratio(float64(p.P50), float64(d.P50)), ratio(float64(p.P99), float64(d.P99)))},
	)
	return rows, nil
}
