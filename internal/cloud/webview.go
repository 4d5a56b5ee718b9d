package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	kvarm "github.com/cerulean/cerulean/internal/cloud/arm/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/arm/postgresql"
	"github.com/cerulean/cerulean/internal/cloud/engines"
	"github.com/cerulean/cerulean/internal/cloud/webview"
)

// The web view (issue 27), mounted on the main listener only: not on the forward proxy's
// front, which pods reach.

func (c *Cloud) startWebView(boot bootstrap) error {
	v, err := webview.New(webview.Options{
		DataDir: c.settings.DataDir, ARM: c.arm, Authz: c.arm.Authz(), Directory: c.entra.Directory,
		Requests: c.requests, TenantID: boot.TenantID, SubscriptionID: boot.SubscriptionID, OwnerObjectID: boot.ObjectID,
		DataPlanes: dataPlaneState{c}, Logger: c.log.With("service", "webview"),
	})
	if err != nil {
		return err
	}
	c.view = v
	c.settings.WebViewURL = c.settings.URL + webview.Prefix + "/"
	c.settings.WebViewTokenFile = webview.TokenFile(c.settings.DataDir)
	return nil
}

// withWebView sends the view's paths to it and the rest to next.
func (c *Cloud) withWebView(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == webview.Prefix || strings.HasPrefix(r.URL.Path, webview.Prefix+"/") {
			c.view.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// WebView is the view, for in-process callers (tests compare its answers with the authorizer's).
func (c *Cloud) WebView() *webview.View { return c.view }

// dataPlaneState is the tree's window on the data planes the cloud runs: a vault's secrets, keys
// and certificates with their versions, a PostgreSQL server's databases. Names only.
type dataPlaneState struct{ c *Cloud }

func (d dataPlaneState) State(ctx context.Context, res arm.Resource) ([]string, error) {
	switch {
	case strings.EqualFold(res.Type, kvarm.VaultType) && d.c.keyVault != nil:
		objs, err := d.c.keyVault.data.Contents(ctx, res.Name)
		if err != nil {
			return nil, err
		}
		lines := make([]string, 0, len(objs))
		for _, o := range objs {
			l := fmt.Sprintf("%s %s, versions: %s", o.Kind, o.Name, strings.Join(o.Versions, ", "))
			if o.Deleted {
				l += " (deleted, recoverable)"
			}
			lines = append(lines, l)
		}
		return lines, nil
	case strings.EqualFold(res.Type, postgresql.ServerType) && d.c.engines != nil:
		dbs, err := d.c.engines.postgres.Databases(ctx, res)
		if errors.Is(err, engines.ErrNotRunning) {
			return []string{"(server not running)"}, nil
		}
		if err != nil {
			return nil, err
		}
		lines := make([]string, len(dbs))
		for i, db := range dbs {
			lines[i] = "database " + db
		}
		return lines, nil
	}
	return nil, nil
}
