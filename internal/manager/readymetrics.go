package manager

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cerulean/cerulean/api/shared"
)

// readyDesc is Cerulean's own gauge (ASO has none): how many objects of each kind have
// Ready=True. Named in ASO's style so that it sits beside azure_*_requests_total.
var readyDesc = prometheus.NewDesc("azure_resources_ready",
	"Number of objects of a kind whose Ready condition is True (Cerulean's own metric).",
	[]string{"group", "kind"}, nil)

// readyCollector counts Ready objects at each scrape from the manager's cache, which already
// holds every object the controllers watch: no bookkeeping in the reconcilers, and the count
// cannot drift from the cluster's.
type readyCollector struct {
	mu    sync.Mutex
	cache client.Reader
	kinds []schema.GroupVersionKind
}

// The collector is registered once per process on controller-runtime's registry; each manager
// that starts points it at its own cache (tests and `up` start several in turn).
var ready = &readyCollector{}

func registerReady(cache client.Reader, kinds []schema.GroupVersionKind) error {
	ready.mu.Lock()
	ready.cache, ready.kinds = cache, kinds
	ready.mu.Unlock()
	if err := metrics.Registry.Register(ready); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return err
	}
	return nil
}

func (c *readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- readyDesc }

func (c *readyCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	cache, kinds := c.cache, c.kinds
	c.mu.Unlock()
	if cache == nil {
		return
	}
	// A cache not yet synced (a scrape during start-up) reports nothing rather than a zero.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		// The objects are only read: no copy of each at every scrape.
		if err := cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			continue
		}
		n := 0
		for i := range list.Items {
			if isReady(list.Items[i].Object) {
				n++
			}
		}
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, float64(n), gvk.Group, gvk.Kind)
	}
}

func isReady(obj map[string]any) bool {
	conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == shared.ConditionTypeReady {
			return m["status"] == "True"
		}
	}
	return false
}
