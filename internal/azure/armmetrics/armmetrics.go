// Package armmetrics counts and times the manager's ARM requests under Azure Service
// Operator's metric names and labels, so that dashboards and alerts built for ASO v2 work
// unchanged: azure_successful_requests_total (requests that got a response, whatever its
// status), azure_failed_requests_total (requests that got none) and azure_requests_time_seconds.
package armmetrics

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Labels, as ASO names them: the ARM resource type (never a name or an id, which could say
// more than an operator wants in a time series), the HTTP method and the response's status.
var (
	successful = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "azure_successful_requests_total",
		Help: "Total number of requests to Azure that got a response; responseCode may be a failure such as 4xx or 5xx.",
	}, []string{"resource", "requestType", "responseCode"})
	failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "azure_failed_requests_total",
		Help: "Total number of requests to Azure that got no response (connection or timeout errors).",
	}, []string{"resource", "requestType"})
	duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "azure_requests_time_seconds",
		Help: "Round-trip time of requests to Azure.",
	}, []string{"resource", "requestType"})
	registerOnce sync.Once
)

// Register adds the collectors to controller-runtime's registry, which the manager's metrics
// endpoint serves. Several managers in one process (tests, `up`) share them.
func Register() {
	registerOnce.Do(func() {
		for _, c := range []prometheus.Collector{successful, failed, duration} {
			if err := metrics.Registry.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				panic(err) // a different collector under one of these names: a programming error
			}
		}
	})
}

// Policy records every HTTP attempt of an ARM client. It belongs in PerRetryPolicies, so that a
// throttled request retried after a 429 counts the 429 too, as ARM saw it.
type Policy struct{}

var _ policy.Policy = Policy{}

// Do times the request and records its outcome.
func (Policy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	resource := ResourceType(raw.URL.Path)
	start := time.Now()
	resp, err := req.Next()
	duration.WithLabelValues(resource, raw.Method).Observe(time.Since(start).Seconds())
	if err != nil || resp == nil {
		failed.WithLabelValues(resource, raw.Method).Inc()
		return resp, err
	}
	successful.WithLabelValues(resource, raw.Method, strconv.Itoa(resp.StatusCode)).Inc()
	return resp, err
}

// ResourceType is the ARM resource type a path addresses ("Microsoft.Resources/resourceGroups"),
// or "" when the path is no resource id (a subscription-level list, an operation's status URL
// ARM did not put under a resource). ASO drops such requests from its metrics; Cerulean counts
// them under "" so that the totals are every request sent.
func ResourceType(path string) string {
	id, err := arm.ParseResourceID(path)
	if err != nil {
		return ""
	}
	return id.ResourceType.String()
}

// With returns a copy of opts whose clients record their requests. A nil opts gives options
// with the policy alone.
func With(opts *arm.ClientOptions) *arm.ClientOptions {
	out := &arm.ClientOptions{}
	if opts != nil {
		*out = *opts
	}
	out.PerRetryPolicies = append(append([]policy.Policy(nil), out.PerRetryPolicies...), Policy{})
	return out
}
