package podidentity

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cerulean/cerulean/internal/podidentity"
)

// aad-pod-identity's MIC series (its pkg/metrics, v1.8.17), under its names, types, labels and
// buckets (its OpenCensus exporter's "aadpodidentity_" prefix; counts are counters named
// ..._count), so that dashboards and alerts built for the MIC read the manager unchanged.
// Only those whose meaning the controller has are kept: no cycle or leader-election series
// (controller-runtime's reconcile and leader-election metrics say that here).
var (
	assignedBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 2, 3, 4, 5, 10}
	additionTime    = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "aadpodidentity",
		Name: "assigned_identity_addition_duration_seconds", Help: "Duration in seconds of assigned identity addition operations", Buckets: assignedBuckets})
	additions = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "aadpodidentity",
		Name: "assigned_identity_addition_count", Help: "Total number of assigned identity addition operations"})
	deletionTime = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "aadpodidentity",
		Name: "assigned_identity_deletion_duration_seconds", Help: "Duration in seconds of assigned identity deletion operations", Buckets: assignedBuckets})
	deletions = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "aadpodidentity",
		Name: "assigned_identity_deletion_count", Help: "Total number of assigned identity deletion operations"})
	// cloudTime and cloudErrors are the GETs and PATCHes of VMs and scale sets, by upstream's
	// operation_type (vmss_get, vmss_update, vm_get, vm_update): successes timed (an update until
	// its long-running operation ends), failures counted.
	cloudTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "aadpodidentity",
		Name: "cloud_provider_operations_duration_seconds", Help: "Duration in seconds of cloudprovider operations",
		Buckets: []float64{0.5, 1, 5, 10, 30, 60, 120, 300, 600, 900, 1200}}, []string{"operation_type"})
	cloudErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "aadpodidentity",
		Name: "cloud_provider_operations_errors_count", Help: "Total number of errors in cloud provider operations"}, []string{"operation_type"})
	// kubeErrors counts failed writes of AzureAssignedIdentities: assigned_identity_addition,
	// assigned_identity_deletion, update_azure_assigned_identity_status.
	kubeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "aadpodidentity",
		Name: "kubernetes_api_operations_errors_count", Help: "Total number of errors in kubernetes api operations"}, []string{"operation_type"})

	registerOnce sync.Once
)

// Upstream's operation_type values.
const (
	opAddition     = "assigned_identity_addition"
	opDeletion     = "assigned_identity_deletion"
	opUpdateStatus = "update_azure_assigned_identity_status"
)

// registerMetrics adds the series to controller-runtime's registry, which the manager's metrics
// endpoint serves; several managers in one process (tests, `up`) share them.
func registerMetrics() {
	registerOnce.Do(func() {
		for _, c := range []prometheus.Collector{additionTime, additions, deletionTime, deletions, cloudTime, cloudErrors, kubeErrors} {
			if err := metrics.Registry.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				panic(err) // a different collector under one of these names: a programming error
			}
		}
	})
}

// cloudOperation is upstream's operation_type of a GET (update false) or PATCH of c.
func cloudOperation(c podidentity.Compute, update bool) string {
	kind, verb := "vm", "_get"
	if c.ScaleSet {
		kind = "vmss"
	}
	if update {
		verb = "_update"
	}
	return kind + verb
}

// observeCloud records one ARM call of the controller's.
func observeCloud(op string, start time.Time, err error) {
	if err != nil {
		cloudErrors.WithLabelValues(op).Inc()
		return
	}
	cloudTime.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// observeWrite records one create (addition) or delete (deletion) of an AzureAssignedIdentity:
// timed and counted on success, counted as a Kubernetes API error otherwise.
func observeWrite(op string, start time.Time, err error) {
	switch {
	case err != nil:
		kubeErrors.WithLabelValues(op).Inc()
	case op == opAddition:
		additions.Inc()
		additionTime.Observe(time.Since(start).Seconds())
	default:
		deletions.Inc()
		deletionTime.Observe(time.Since(start).Seconds())
	}
}
