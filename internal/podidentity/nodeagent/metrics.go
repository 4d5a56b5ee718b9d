package nodeagent

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// aad-pod-identity's NMI series (its pkg/metrics, v1.8.17), under its names, types, labels and
// buckets, so that dashboards and alerts built for the NMI read the agent unchanged. Upstream's
// OpenCensus exporter prefixes them with "aadpodidentity_" and exports counts as counters
// named ..._count. Only the series whose meaning the agent has are kept.
const metricsNamespace = "aadpodidentity"

// Upstream's operation_type values for token fetches (imds_operations_*: a user-assigned
// identity's from the node's IMDS, a service principal's from Entra ID) and Kubernetes reads.
const (
	opTokenMSIUserAssigned = "adal_token_msi_userassignedid" //nolint:gosec // a label value, not a credential
	opTokenSP              = "adal_token"
	opGetSecret            = "get_secret"
)

// metrics are one agent's series, on a registry of its own: several agents in one process
// (`up`, tests) each report their own, and none lands in another component's endpoint.
type metrics struct {
	registry *prometheus.Registry
	// nmi times every token request the agent answers, by route, status, the caller pod's
	// namespace and the resource asked for.
	nmi *prometheus.HistogramVec
	// imdsTime and imdsErrors time the agent's own token fetches (a cache miss), by kind:
	// successes are timed, failures counted, as upstream does.
	imdsTime   *prometheus.HistogramVec
	imdsErrors *prometheus.CounterVec
	// kubeErrors counts failed Kubernetes reads the agent makes per request (a service
	// principal's Secret).
	kubeErrors *prometheus.CounterVec
}

func newMetrics() *metrics {
	secondsBuckets := []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 2, 3, 4, 5, 10}
	m := &metrics{
		registry: prometheus.NewRegistry(),
		nmi: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "nmi_operations_duration_seconds", Help: "Duration in seconds for nmi operations",
			Buckets: []float64{0.5, 1, 2, 3, 4, 5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100},
		}, []string{"operation_type", "status_code", "namespace", "resource"}),
		imdsTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "imds_operations_duration_seconds", Help: "Duration in seconds of imds token operations",
			Buckets: secondsBuckets,
		}, []string{"operation_type"}),
		imdsErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "imds_operations_errors_count", Help: "Total number of errors in imds token operations",
		}, []string{"operation_type"}),
		kubeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "kubernetes_api_operations_errors_count", Help: "Total number of errors in kubernetes api operations",
		}, []string{"operation_type"}),
	}
	m.registry.MustRegister(m.nmi, m.imdsTime, m.imdsErrors, m.kubeErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// metricOperation is upstream's operation_type of a route: its path, for the two token routes
// only (upstream also times other paths under their raw path, which a pod could make
// unbounded; the agent's proxied and refused non-token paths are not timed).
func metricOperation(rt route) string {
	switch rt {
	case routeToken:
		return imdsTokenPath
	case routeHostToken:
		return "/host/token/"
	}
	return ""
}

// handler serves the registry in Prometheus' text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// observeRequest records one answered token request. Labels hold nothing secret and nothing a
// caller can make unbounded: the route's name (not the raw path), the status, the namespace of
// a pod that exists, and the resource only when a token for it was issued (Entra ID issues none
// for a resource it does not know); clipped all the same.
func (m *metrics) observeRequest(op string, status int, namespace, resource string, took time.Duration) {
	if status != http.StatusOK {
		resource = ""
	}
	m.nmi.WithLabelValues(op, strconv.Itoa(status), namespace, clip(resource, 200)).Observe(took.Seconds())
}

// observeFetch records one token fetch of the agent's: timed on success, counted on failure.
func (m *metrics) observeFetch(op string, took time.Duration, err error) {
	if err != nil {
		m.imdsErrors.WithLabelValues(op).Inc()
		return
	}
	m.imdsTime.WithLabelValues(op).Observe(took.Seconds())
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController (the IMDS proxy's flushes) reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
