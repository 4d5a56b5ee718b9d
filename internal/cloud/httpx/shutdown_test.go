package httpx_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

// A request in flight when shutdown starts still gets its answer, over HTTP/2, and shutdown
// then completes without error.
func TestShutdownLetsRequestsInFlightFinish(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var inflight httpx.InFlight
	ts := httptest.NewUnstartedServer(inflight.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "done")
	})))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	addr := ts.Listener.Addr().String()

	type answer struct {
		body  string
		proto string
		err   error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := ts.Client().Get(ts.URL)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{body: string(b), proto: resp.Proto, err: err}
	}()
	<-entered

	shut := make(chan error, 1)
	go func() { shut <- httpx.Shutdown(context.Background(), ts.Config, &inflight) }()
	// Once the listener is closed, shutdown has started; the request is still being served.
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		_ = c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	close(release)

	a := <-got
	if a.err != nil || a.body != "done" {
		t.Fatalf("the request in flight: body %q, err %v; want its answer", a.body, a.err)
	}
	if a.proto != "HTTP/2.0" {
		t.Errorf("served over %s; the test is about HTTP/2", a.proto)
	}
	if err := <-shut; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}
