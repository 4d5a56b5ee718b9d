package manager_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/manager"
)

// BenchmarkReconcileGenericVsTyped is the cost of the generic kind against the typed one for the
// same resource: one UserAssignedIdentity created and brought to Ready per op, through the typed
// kind (the baseline), then through AzureResource. ns/op is the time to Ready; cpu-ms/op is the
// process's CPU time per op (manager, cloud and API client alike, the same for both but the kind).
func BenchmarkReconcileGenericVsTyped(b *testing.B) {
	c := kube(b)
	az := cloudtest.Start(b, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(b, c)
	startManagerOpts(b, manager.Options{Azure: azureConfig(az), SyncPeriod: time.Hour, PollInterval: 100 * time.Millisecond,
		TargetNamespaces: []string{ns}, GenericResourceTypes: []string{"Microsoft.ManagedIdentity/userAssignedIdentities"}})
	rg := obj(rgAPI, "ResourceGroup", "bench-rg", map[string]any{"location": "westus2"})
	create(b, c, ns, rg)
	waitReady(b, c, rg, time.Minute)
	owner := []string{"resources.azure.com", "ResourceGroup", "bench-rg"}
	kinds := []struct {
		name string
		mk   func(name string) *unstructured.Unstructured
	}{
		{"typed", func(name string) *unstructured.Unstructured {
			return obj(msiAPI, "UserAssignedIdentity", name, map[string]any{"location": "westus2", "owner": map[string]any{"name": "bench-rg"}})
		}},
		{"generic", func(name string) *unstructured.Unstructured {
			return generic(name, "Microsoft.ManagedIdentity/userAssignedIdentities", "2023-01-31", owner, map[string]any{"location": "westus2"})
		}},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			cpu0, i := cpuTime(b), 0
			for b.Loop() {
				u := k.mk(fmt.Sprintf("%s-%d", k.name, i))
				i++
				create(b, c, ns, u)
				waitReady(b, c, u, time.Minute)
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(i), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
