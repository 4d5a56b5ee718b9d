package webview_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/webview"
	"github.com/cerulean/cerulean/internal/testenv"
)

// browser starts headless Chromium (Debian's package) for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Missing(t, "chromium is not installed; hack/install-test-deps.sh chromium installs it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI containers
		chromedp.Flag("ignore-certificate-errors", true), // the cloud's CA is not in the browser's store
		chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page is what the browser rendered at one address.
type page struct{ name, html string }

// TestWebViewInBrowser drives the web view in Chromium over resources, identities, a refused
// federated exchange and role assignments made through ARM with the Azure SDK.
func TestWebViewInBrowser(t *testing.T) {
	bctx := browser(t)
	is := cloudtest.NewIssuer(t)
	c := cloudtest.Start(t, cloud.Options{TrustCAs: [][]byte{is.CAPEM()}, ARM: cloudtest.FastARM()})
	s := c.Settings()
	owner, opts := cloudtest.OwnerCred(t, c), cloudtest.ARMOptions(c)
	ctx := t.Context()

	// Through ARM, as a user would: a group, an identity, its federated credential, a role.
	rgID := cloudtest.CreateGroup(t, c, owner, opts, "local", "shop-rg")
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, opts)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := ids.CreateOrUpdate(ctx, "shop-rg", "shop-app", armmsi.Identity{Location: to.Ptr("local")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clientID, objectID := *mi.Properties.ClientID, *mi.Properties.PrincipalID
	fics, err := armmsi.NewFederatedIdentityCredentialsClient(s.SubscriptionID, owner, opts)
	if err != nil {
		t.Fatal(err)
	}
	const subject = "system:serviceaccount:shop:app"
	if _, err := fics.CreateOrUpdate(ctx, "shop-rg", "shop-app", "k8s", armmsi.FederatedIdentityCredential{Properties: &armmsi.FederatedIdentityCredentialProperties{
		Issuer: to.Ptr(is.URL()), Subject: to.Ptr(subject), Audiences: []*string{to.Ptr(cloudtest.ExchangeAudience)}}}, nil); err != nil {
		t.Fatal(err)
	}
	ras, err := armauthorization.NewRoleAssignmentsClient(s.SubscriptionID, owner, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ras.Create(ctx, rgID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: to.Ptr("/subscriptions/" + s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + authz.Reader),
		PrincipalID:      to.Ptr(objectID), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
	}}, nil); err != nil {
		t.Fatal(err)
	}

	// A pod of the wrong service account tries the exchange: refused.
	const wrongSubject = "system:serviceaccount:shop:intruder"
	assertion := is.Token(t, wrongSubject)
	cred, err := azidentity.NewClientAssertionCredential(s.TenantID, clientID, func(context.Context) (string, error) { return assertion, nil },
		&azidentity.ClientAssertionCredentialOptions{ClientOptions: cloudtest.NoRetry(c), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cred.GetToken(ctx, tokenScope); err == nil || !strings.Contains(err.Error(), "AADSTS700213") {
		t.Fatalf("exchange with the wrong subject: got %v, want AADSTS700213", err)
	}

	// Secrets the test holds: none may reach a page.
	tokenBytes, err := os.ReadFile(s.WebViewTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	viewToken := strings.TrimSpace(string(tokenBytes))
	app, appCred := cloudtest.NewPrincipal(t, c, "some-app")
	secrets := map[string]string{
		"bootstrap client secret": s.ClientSecret,
		"owner access token":      cloudtest.Token(t, owner, "https://management.core.windows.net/.default"),
		"app access token":        cloudtest.Token(t, appCred, "https://management.core.windows.net/.default"),
		"service-account token":   assertion,
		"web view login token":    viewToken,
	}

	artifacts := os.Getenv("ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	artifacts = filepath.Join(artifacts, "webview")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	var rendered []page
	visit := func(name, path string, actions ...chromedp.Action[chromedp.Void]) string {
		t.Helper()
		all := append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(s.URL + webview.Prefix + path), chromedp.WaitReady(chromedp.CSS("body"))}, actions...)
		if err := chromedp.Do(bctx, all...); err != nil {
			t.Fatalf("render %s: %v", path, err)
		}
		html, err := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", path, err)
		}
		if err := os.WriteFile(filepath.Join(artifacts, name+".png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
		rendered = append(rendered, page{name, html})
		return html
	}

	// Without the cookie, the browser gets a bare 401.
	if html := visit("unauthenticated", "/"); !strings.Contains(html, "401 Unauthorized") || strings.Contains(html, "shop-rg") {
		t.Errorf("unauthenticated page = %q", html)
	}
	// The login URL sets the cookie and leads to the tree.
	if err := chromedp.Do(bctx, chromedp.Navigate(webview.LoginURL(s.URL, viewToken)), chromedp.WaitVisible(chromedp.CSS(".tree"))); err != nil {
		t.Fatal(err)
	}
	landed, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if landed != s.WebViewURL {
		t.Errorf("after login the browser is at %s, want %s (no token in the address bar)", landed, s.WebViewURL)
	}

	tree := visit("resources", "/", chromedp.Click(chromedp.CSS(`details[data-id$="/shop-app"] > summary`)), chromedp.WaitVisible(chromedp.CSS(`pre[data-id$="/shop-app"]`)))
	for _, want := range []string{"shop-rg", "shop-app", "Microsoft.ManagedIdentity/userAssignedIdentities", clientID, `"principalId": "` + objectID,
		"federatedIdentityCredentials/k8s", `"subject": "` + subject} {
		if !strings.Contains(tree, want) {
			t.Errorf("resource tree lacks %q", want)
		}
	}

	idPage := visit("identity", "/identity?clientId="+clientID)
	for _, want := range []string{"k8s", is.URL(), subject, cloudtest.ExchangeAudience, "Reader", rgID} {
		if !strings.Contains(idPage, want) {
			t.Errorf("identity page lacks %q", want)
		}
	}
	visit("identities", "/identities")

	logPage := visit("log", "/log?principal="+url.QueryEscape(objectID), chromedp.WaitVisible(chromedp.CSS("tr.refused")))
	reason, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`tr.refused td.reason`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{wrongSubject, subject, `"k8s"`, "No federated credential"} {
		if !strings.Contains(reason, want) {
			t.Errorf("refusal's reason %q lacks %q", reason, want)
		}
	}
	if !strings.Contains(logPage, "401") {
		t.Errorf("log page lacks the refused exchange's status")
	}

	// The live log: a request made while the page is open appears without a reload.
	before := c.RequestLog().Last()
	if _, err := cred.GetToken(ctx, tokenScope); err == nil {
		t.Fatal("second exchange succeeded")
	}
	if c.RequestLog().Last() <= before {
		t.Fatal("the second exchange was not logged")
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-seq="`+itoa(c.RequestLog().Last())+`"]`))); err != nil {
		t.Fatalf("live log: %v", err)
	}

	// An ARM refusal names the action, the scope and what the principal holds (nothing).
	groups, err := armresources.NewResourceGroupsClient(s.SubscriptionID, appCred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups.Get(ctx, "shop-rg", nil); err == nil {
		t.Fatal("a principal without a role read the group")
	}
	visit("log-arm-403", "/log?"+url.Values{"principal": {"some-app"}, "status": {"403"}}.Encode(), chromedp.WaitVisible(chromedp.CSS("tr.refused")))
	reason, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`tr.refused td.reason`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Microsoft.Resources/subscriptions/resourceGroups/read", rgID, "It holds no role assignments."} {
		if !strings.Contains(reason, want) {
			t.Errorf("ARM refusal's reason %q lacks %q", reason, want)
		}
	}

	// "Check access" says what the authorizer says (it calls it: same code), with the grant.
	sub := "/subscriptions/" + s.SubscriptionID
	cases := []struct{ principal, scope, action string }{
		{objectID, rgID, "Microsoft.Resources/subscriptions/resourceGroups/read"},
		{objectID, rgID + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/shop-app", "Microsoft.ManagedIdentity/userAssignedIdentities/read"},
		{objectID, rgID, "Microsoft.ManagedIdentity/userAssignedIdentities/write"},
		{objectID, sub, "Microsoft.Resources/subscriptions/resourceGroups/read"},
		{s.ObjectID, sub, "Microsoft.Authorization/roleAssignments/write"},
		{app.ObjectID, rgID, "Microsoft.Resources/subscriptions/resourceGroups/read"},
	}
	for i, tc := range cases {
		q := url.Values{"principal": {tc.principal}, "scope": {tc.scope}, "action": {tc.action}}
		visit("access-"+itoa(uint64(i)), "/access?"+q.Encode())
		verdict, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#verdict")))
		if err != nil {
			t.Fatal(err)
		}
		want := c.ARM().Authz().Check(ctx, tc.principal, tc.action, tc.scope) == nil
		if got := strings.HasPrefix(verdict, "Allowed"); got != want {
			t.Errorf("check access %s %s at %s: page says %q, authorizer allowed=%v", tc.principal, tc.action, tc.scope, verdict, want)
		}
		if want && !strings.Contains(verdict, "Reader") && !strings.Contains(verdict, "Owner") {
			t.Errorf("check access %s: the verdict %q names no granting role", tc.action, verdict)
		}
	}
	access := visit("access", "/access?"+url.Values{"principal": {objectID}, "scope": {rgID}, "action": {"Microsoft.Resources/subscriptions/resourceGroups/read"}}.Encode())
	if !strings.Contains(access, "*/read") {
		t.Errorf("effective permissions lack Reader's */read")
	}

	for _, p := range rendered {
		for what, secret := range secrets {
			if secret != "" && strings.Contains(p.html, secret) {
				t.Errorf("page %s shows the %s", p.name, what)
			}
		}
	}
	t.Logf("screenshots in %s", artifacts)
}

// TestWebViewRefusesWithoutLogin: no cookie, a wrong cookie or a wrong token gets 401 and
// nothing else, on every page; the token file is the user's alone.
func TestWebViewRefusesWithoutLogin(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := c.Settings()
	fi, err := os.Stat(s.WebViewTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode = %v, want 0600", fi.Mode().Perm())
	}
	hc := &http.Client{Transport: c.Transport(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, cookie *http.Cookie) (int, string, *http.Response) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res
	}
	for _, p := range []string{"/", "/identities", "/identity?clientId=" + s.ClientID, "/access?principal=" + s.ObjectID + "&scope=/", "/log", "/log/rows", "/assets/log.js", "/nope", "/login", "/login?token=wrong"} {
		for _, cookie := range []*http.Cookie{nil, {Name: "cerulean_view", Value: "wrong"}} {
			status, body, _ := get(webview.Prefix+p, cookie)
			if status != http.StatusUnauthorized || body != "401 Unauthorized\n" {
				t.Errorf("GET %s (cookie %v) = %d %q, want a bare 401", p, cookie, status, body)
			}
		}
	}
	tok, err := os.ReadFile(s.WebViewTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	status, _, res := get(webview.Prefix+"/login?token="+strings.TrimSpace(string(tok)), nil)
	if status != http.StatusSeeOther {
		t.Fatalf("login = %d, want 303", status)
	}
	var session *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "cerulean_view" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login cookie = %+v, want HttpOnly, Secure, SameSite=Strict", session)
	}
	if status, body, _ := get(webview.Prefix+"/identities", session); status != http.StatusOK || !bytes.Contains([]byte(body), []byte(s.ClientID)) {
		t.Errorf("with the cookie: %d, page lacks the bootstrap principal", status)
	}
}

var tokenScope = policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net/.default"}}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
