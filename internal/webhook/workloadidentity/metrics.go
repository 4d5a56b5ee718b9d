package workloadidentity

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// mutationRequests is upstream azure-workload-identity's azwi_mutation_request: a histogram of
// the seconds each admission request took, by the pod's namespace. Upstream exports it through
// OpenTelemetry with service_name="webhook"; the constant label keeps dashboards that filter on
// it working.
var (
	mutationRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:        "azwi_mutation_request",
		Help:        "Distribution of how long it took for the azure-workload-identity mutation request",
		ConstLabels: prometheus.Labels{"service_name": "webhook"},
	}, []string{"namespace"})
	registerOnce sync.Once
)

// registerMetrics adds the histogram to controller-runtime's registry, served on the manager's
// metrics endpoint; several managers in one process share it.
func registerMetrics() {
	registerOnce.Do(func() {
		if err := metrics.Registry.Register(mutationRequests); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			panic(err) // another collector under this name: a programming error
		}
	})
}

func reportRequest(namespace string, took time.Duration) {
	mutationRequests.WithLabelValues(namespace).Observe(took.Seconds())
}
