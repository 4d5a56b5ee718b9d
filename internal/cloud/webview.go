package cloud

import (
	"net/http"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/webview"
)

// The web view (issue 27), mounted on the main listener only: not on the forward proxy's
// front, which pods reach.

func (c *Cloud) startWebView(boot bootstrap) error {
	v, err := webview.New(webview.Options{
		DataDir: c.settings.DataDir, ARM: c.arm, Authz: c.arm.Authz(), Directory: c.entra.Directory,
		Requests: c.requests, TenantID: boot.TenantID, SubscriptionID: boot.SubscriptionID, OwnerObjectID: boot.ObjectID,
		Logger: c.log.With("service", "webview"),
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
