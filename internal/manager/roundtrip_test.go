package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
)

// writeCounter counts the manager's writes (not reads, lists or watches) to the API server by
// path.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

type countingTransport struct {
	next http.RoundTripper
	c    *writeCounter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		t.c.mu.Lock()
		t.c.writes = append(t.c.writes, r.Method+" "+r.URL.Path)
		t.c.mu.Unlock()
	}
	return t.next.RoundTrip(r)
}

// of are the writes whose path names the object (its own path and its status).
func (w *writeCounter) of(ns, resource, name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, x := range w.writes {
		p := strings.SplitN(x, " ", 2)[1]
		if strings.HasSuffix(p, "/namespaces/"+ns+"/"+resource+"/"+name) || strings.HasSuffix(p, "/namespaces/"+ns+"/"+resource+"/"+name+"/status") {
			out = append(out, x)
		}
	}
	return out
}

// trackingLimiter is the workqueue's rate limiter, observed: the items it holds a failure count
// for.
type trackingLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	mu    sync.Mutex
	items map[reconcile.Request]bool
}

func newTrackingLimiter() *trackingLimiter {
	return &trackingLimiter{TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](10*time.Millisecond, time.Second),
		items: map[reconcile.Request]bool{}}
}

func (l *trackingLimiter) When(r reconcile.Request) time.Duration {
	l.mu.Lock()
	l.items[r] = true
	l.mu.Unlock()
	return l.TypedRateLimiter.When(r)
}

func (l *trackingLimiter) Forget(r reconcile.Request) {
	l.mu.Lock()
	delete(l.items, r)
	l.mu.Unlock()
	l.TypedRateLimiter.Forget(r)
}

func (l *trackingLimiter) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// startObservedManager runs the manager with its API traffic counted and its rate limiter
// observed.
func startObservedManager(t *testing.T, az *cloud.Cloud, ns string) (*writeCounter, *trackingLimiter) {
	t.Helper()
	counter, limiter := &writeCounter{}, newTrackingLimiter()
	cfg := rest.CopyConfig(devenvtest.ControlPlane(t).RESTConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, c: counter} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &cloudtest.SyncBuffer{}
	go func() {
		done <- manager.Run(ctx, manager.Options{
			REST: cfg, Azure: azureConfig(az), SyncPeriod: time.Minute, PollInterval: 100 * time.Millisecond,
			TargetNamespaces: []string{ns}, MetricsAddr: "0", HealthAddr: "0", SkipNameValidation: true,
			Logger: logr.FromSlogHandler(cloudtest.DebugLogger(logs).Handler()), RateLimiter: limiter,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", tail(logs.String(), 60))
		}
	})
	t.Cleanup(func() { deleteAll(t, []string{ns}) })
	return counter, limiter
}

// A first create writes the object twice: the finalizer, the id and the body's hash before the
// PUT (one metadata patch), then the status. A child that waits for its owner writes only its
// status until the owner is Ready.
func TestFirstCreateRoundTrips(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	counter, _ := startObservedManager(t, az, ns)

	rg := resourceGroup("trips-rg", nil)
	create(t, c, ns, rg)
	waitReady(t, c, rg, time.Minute)
	settledEvents(t, c, ns)
	writes := counter.of(ns, "resourcegroups", "trips-rg")
	t.Logf("writes of a first create: %d %v", len(writes), writes)
	if len(writes) > 2 {
		t.Errorf("a first create wrote the object %d times: %v", len(writes), writes)
	}
}

// Objects created and deleted in a loop while failing leave nothing behind in the manager:
// the workqueue's rate limiter forgets each once it is gone.
func TestNothingGrowsWithChurn(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	_, limiter := startObservedManager(t, az, ns)

	for round := range 5 {
		var objs []*unstructured.Unstructured
		for i := range 4 {
			// An owner missing in Azure (ARM's 404): a failure the rate limiter backs off. (A
			// missing owner object is not one: the owner's watch wakes the child.)
			objs = append(objs, obj(msiAPI, "UserAssignedIdentity", fmt.Sprintf("churn-%d-%d", round, i),
				map[string]any{"location": "westus2", "owner": map[string]any{"armId": "/subscriptions/" + az.Settings().SubscriptionID + "/resourceGroups/no-such-rg"}}))
		}
		create(t, c, ns, objs...)
		eventually(t, time.Minute, "failing", func() (bool, string) {
			return limiter.held() >= len(objs), fmt.Sprintf("%d held", limiter.held())
		})
		for _, u := range objs {
			if err := c.Delete(t.Context(), u); err != nil {
				t.Fatal(err)
			}
		}
		for _, u := range objs {
			waitGone(t, c, u, time.Minute)
		}
	}
	eventually(t, time.Minute, "rate limiter empty", func() (bool, string) {
		return limiter.held() == 0, fmt.Sprintf("%d objects still held", limiter.held())
	})
}
