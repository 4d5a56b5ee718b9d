package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/cerulean/cerulean/internal/devenv"
)

func init() {
	register(section{title: "Local control plane start", run: benchControlPlaneStart})
}

const controlPlaneRuns = 3

// benchControlPlaneStart times Start until every component is ready: cold on a fresh data
// directory (certificates, etcd bootstrap, RBAC), warm on the same directory again.
// The warm start is compared with the cold one as its baseline.
func benchControlPlaneStart(ctx context.Context, env benchEnv) ([]row, error) {
	var cold, warm []time.Duration
	for range controlPlaneRuns {
		dir, err := os.MkdirTemp(env.scratch, "controlplane-")
		if err != nil {
			return nil, err
		}
		for _, into := range []*[]time.Duration{&cold, &warm} {
			start := time.Now()
			cp, err := devenv.Start(ctx, devenv.Options{DataDir: dir, BinDir: env.binDir})
			if err != nil {
				return nil, err
			}
			*into = append(*into, time.Since(start))
			cp.Stop()
		}
	}
	c, w := median(cold), median(warm)
	return []row{
		{benchmark: fmt.Sprintf("cold start (fresh data dir), median of %d", controlPlaneRuns), result: c.Round(10 * time.Millisecond).String()},
		{benchmark: fmt.Sprintf("warm start (same data dir), median of %d", controlPlaneRuns), result: w.Round(10 * time.Millisecond).String(), vsBaseline: ratio(w.Seconds(), c.Seconds()) + " of cold"},
	}, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
