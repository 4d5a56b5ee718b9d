package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
)

// With leader election two replicas share one Lease; the holder reconciles, and when it stops
// the other takes over.
func TestLeaderElection(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	run := func() (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- manager.Run(ctx, manager.Options{
				REST: devenvtest.ControlPlane(t).RESTConfig, Azure: azureConfig(az), SyncPeriod: time.Minute,
				PollInterval: 100 * time.Millisecond, TargetNamespaces: []string{ns}, MetricsAddr: "0", HealthAddr: "0",
				LeaderElection: true, LeaderElectionNamespace: ns, SkipNameValidation: true, Logger: logr.Discard(),
			})
		}()
		return cancel, done
	}
	stopA, doneA := run()
	lease := &coordinationv1.Lease{}
	holder := ""
	eventually(t, time.Minute, "a leader", func() (bool, string) {
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: manager.LeaderElectionID}, lease); err != nil {
			return false, err.Error()
		}
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return holder != "", "no holder"
	})
	stopB, doneB := run() // started once A leads: B waits
	defer func() {
		stopB()
		if err := <-doneB; err != nil {
			t.Error(err)
		}
	}()
	first := resourceGroup("leader-rg", nil)
	create(t, c, ns, first)
	waitReady(t, c, first, time.Minute)

	// Stop the leader; the other must take over (A releases the Lease on cancel).
	stopA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	second := resourceGroup("after-failover-rg", nil)
	create(t, c, ns, second)
	waitReady(t, c, second, 2*time.Minute)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: manager.LeaderElectionID}, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == holder {
		t.Errorf("the Lease is still held by %q after its holder stopped", holder)
	}
	for _, u := range []client.Object{first, second} {
		if err := c.Delete(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(t, c, first, time.Minute)
	waitGone(t, c, second, time.Minute)
}
