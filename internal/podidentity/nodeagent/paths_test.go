package nodeagent_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

// Issue 22, point 1: path spellings must not carry a pod's request past the agent to the
// node's IMDS. The agent runs in-process with a recording IMDS; a pod object whose address is
// a loopback alias makes this test's connections a pod's. Each spelling is sent byte for byte
// (no client normalises it); the recorder must never see /metadata/identity or
// /metadata/instance, in any case.
func TestPathSpellingsNeverReachIMDS(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	kc, err := client.New(cp.RESTConfig, client.Options{Scheme: podidentitytest.Scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var mu sync.Mutex
	var seen []string
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.EscapedPath())
		mu.Unlock()
		_, _ = w.Write([]byte(`{"forwarded":true}`))
	}))
	defer imds.Close()

	node, ns, podIP := "paths-node-"+tag(), "paths-"+tag(), "127.0.0.77"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "attacker"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, pod} {
		if err := kc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = kc.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP}
	if err := kc.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(imds.URL)
	agent, err := nodeagent.New(nodeagent.Options{NodeName: node, Config: cp.RESTConfig, Listen: "127.0.0.1:0",
		Tokens: &nodeagent.IMDSSource{Endpoint: imds.URL}, IMDS: u, AssignWait: time.Millisecond, FlushPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	agentCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(agentCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})

	// send writes one request with the target exactly as given, from the pod's address.
	send := func(target string) int {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}, Timeout: 10 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", agent.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "GET %s?resource=https%%3A%%2F%%2Fvault.azure.net&api-version=2018-02-01 HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\nConnection: close\r\n\r\n", target)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The agent knows the pod once its informer has the address: the canonical instance path
	// is then refused as a pod's (403), not as an unknown caller's.
	deadline := time.Now().Add(30 * time.Second)
	for send("/metadata/instance") != http.StatusForbidden || !agentKnowsPod(t, agent, podIP) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never recognised the pod")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Not canonical: refused with 400 whatever route they would clean to.
	nonCanonical := []string{
		"//metadata/identity/oauth2/token", "/metadata/identity//oauth2/token", "/metadata/identity/oauth2/./token",
		"/metadata/identity/oauth2/x/../token", "/metadata//instance", "/metadata/./instance", "/x/../metadata/instance",
		`/metadata\identity\oauth2\token`, "/metadata/identity/oauth2/%74oken", "/metadata%2Fidentity/oauth2/token",
		"/metadata/identity%2F..%2Finstance", "/metadata/identity./oauth2/token", "/metadata/identity;x/oauth2/token",
	}
	for _, s := range nonCanonical {
		if code := send(s); code != http.StatusBadRequest {
			t.Errorf("%s: answered %d, want 400 for a non-canonical path", s, code)
		}
	}
	// Canonical, in any case: the agent's own routes, never 200 for a pod with no binding.
	variants := []string{
		"/METADATA/IDENTITY/OAUTH2/TOKEN", "/Metadata/Identity/OAuth2/Token", "/metadata/INSTANCE", "/METADATA/instance/compute",
		"/metadata/Identity/info", "/metadata/identity", "/metadata/identity/oauth2/token/x", "/metadata/identity/oauth2/token",
	}
	for _, s := range variants {
		if code := send(s); code == http.StatusOK {
			t.Errorf("%s: answered 200 for a pod with no binding", s)
		}
	}
	// A harmless route still reaches IMDS (the recorder works).
	if code := send("/metadata/scheduledevents"); code != http.StatusOK {
		t.Errorf("/metadata/scheduledevents: %d, want it forwarded", code)
	}
	mu.Lock()
	defer mu.Unlock()
	forwardedScheduled := false
	for _, p := range seen {
		dec, _ := url.PathUnescape(p)
		clean := strings.ToLower(path.Clean(strings.ReplaceAll(dec, `\`, "/")))
		if strings.HasPrefix(clean, "/metadata/identity") || strings.HasPrefix(clean, "/metadata/instance") {
			t.Errorf("forwarded to IMDS for a pod: %s", p)
		}
		forwardedScheduled = forwardedScheduled || p == "/metadata/scheduledevents"
	}
	if !forwardedScheduled {
		t.Errorf("the recorder saw %v, not /metadata/scheduledevents", seen)
	}
}

// agentKnowsPod: a token request from the pod is refused for want of a binding (the pod's
// refusal), not as an unknown address's.
func agentKnowsPod(t *testing.T, agent *nodeagent.Agent, podIP string) bool {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}}).DialContext}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+agent.Addr()+"/metadata/identity/oauth2/token?resource=x", nil)
	req.Header.Set("Metadata", "true")
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return strings.Contains(b.String(), "No AzureIdentityBinding matches")
}
