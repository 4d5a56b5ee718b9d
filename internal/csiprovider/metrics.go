package csiprovider

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// The upstream provider's (secrets-store-csi-driver-provider-azure) two histograms, with its
// labels: dashboards built for it read these unchanged. provider and os_type are constant.
var (
	upstreamLabels  = prometheus.Labels{"provider": "azure", "os_type": runtime.GOOS}
	keyvaultRequest = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "keyvault_request", Help: "Distribution of how long it took to get from keyvault",
		ConstLabels: upstreamLabels,
	}, []string{"object_type", "object_name", "error"})
	grpcRequest = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "grpc_request", Help: "Distribution of how long it took for the gRPC requests",
		ConstLabels: upstreamLabels,
	}, []string{"grpc_method", "grpc_code", "grpc_message"})
	// cacheLookups is Cerulean's own (upstream has no cache): object lookups served from the
	// cache (hit) or needing Key Vault (miss, shared by concurrent lookups of one object).
	cacheLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "keyvault_cache_lookups_total", Help: "Object lookups served from the provider's cache (hit) or fetched from Key Vault (miss)",
		ConstLabels: upstreamLabels,
	}, []string{"result"})

	// registry is the provider's own: it runs without controller-runtime.
	registry = func() *prometheus.Registry {
		r := prometheus.NewRegistry()
		r.MustRegister(keyvaultRequest, grpcRequest, cacheLookups, collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		return r
	}()
)

// MetricsHandler serves the provider's metrics in Prometheus' format (Run serves it at
// /metrics on Options.MetricsAddr).
func MetricsHandler() http.Handler {
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
}

// reportKeyvault records one fetch from Key Vault (cache hits are not requests). The error label
// is Key Vault's error code (SecretNotFound, Forbidden), never the message, which may quote a
// request; "" on success, as upstream.
func reportKeyvault(o Object, took time.Duration, err error) {
	code := ""
	if err != nil {
		code = "error"
		var ke *kvStatusError
		if errors.As(err, &ke) && ke.kvCode != "" {
			code = ke.kvCode
		}
	}
	keyvaultRequest.WithLabelValues(o.ObjectType, o.ObjectName, code).Observe(took.Seconds())
}

// timeGRPC records every call the driver makes, by method and status.
func timeGRPC(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	s := status.Convert(err)
	grpcRequest.WithLabelValues(info.FullMethod, s.Code().String(), s.Message()).Observe(time.Since(start).Seconds())
	return resp, err
}
