package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/rollout"
	"github.com/cerulean/cerulean/internal/rollout/rollouttest"
)

func init() {
	register(section{title: "Rollout to many clusters", run: benchRollout})
}

// rolloutPlanes is how many real control planes the section starts: 1 and 3 clusters get one
// each; 10 clusters share the 3 (each cluster's app in a namespace of its own, so each has its
// own federated credential subject and release).
const rolloutPlanes = 3

// benchRollout measures `cerulean rollout` over 1, 3 and 10 clusters registered in a fresh local
// cloud each time (every step writes: a cold run), then the same file again (every step reads
// and finds it done), with --parallel 10; and counts the ARM requests per cluster.
func benchRollout(ctx context.Context, env benchEnv) ([]row, error) {
	planes, stop, err := rollouttest.StartPlanes(ctx, rolloutPlanes, env.binDir)
	if err != nil {
		return nil, err
	}
	defer stop()
	var rows []row
	var base [2]time.Duration // cold, converged for one cluster
	for _, n := range []int{1, 3, 10} {
		cold, warm, perCluster, err := rolloutOnce(ctx, env, planes[:min(n, rolloutPlanes)], n)
		if err != nil {
			return nil, fmt.Errorf("%d clusters: %w", n, err)
		}
		if n == 1 {
			base = [2]time.Duration{cold, warm}
		}
		shared := ""
		if n > rolloutPlanes {
			shared = fmt.Sprintf(", %d control planes shared", rolloutPlanes)
		}
		rows = append(rows,
			row{fmt.Sprintf("rollout, %d cluster(s)%s: first run (every step writes)", n, shared), rolloutSeconds(cold), rolloutRatio(cold, base[0])},
			row{fmt.Sprintf("rollout, %d cluster(s)%s: re-run (converged, nothing written)", n, shared), rolloutSeconds(warm), rolloutRatio(warm, base[1])},
			row{fmt.Sprintf("ARM requests per cluster, %d cluster(s)", n), perCluster, ""},
		)
	}
	return rows, nil
}

// rolloutOnce runs the rollout of n clusters twice on a fresh cloud and returns both times and
// the ARM requests per cluster of each run.
func rolloutOnce(ctx context.Context, env benchEnv, planes []*devenv.ControlPlane, n int) (cold, warm time.Duration, perCluster string, err error) {
	var cas [][]byte
	for _, cp := range planes {
		cas = append(cas, cp.CACertPEM)
	}
	limits := cloudarm.Unlimited
	dir := fmt.Sprintf("rollout-%d", n)
	az, err := startCloud(ctx, env, dir, cloud.Options{TrustCAs: cas, ARM: cloudarm.Config{RetryAfter: 50 * time.Millisecond, Limits: &limits}})
	if err != nil {
		return 0, 0, "", err
	}
	defer az.Close()
	fileDir := filepath.Join(env.scratch, dir+"-file")
	if err := os.MkdirAll(fileDir, 0o750); err != nil {
		return 0, 0, "", err
	}
	lab, err := rollouttest.New(ctx, az, rollouttest.Options{Dir: fileDir, Clusters: n, Planes: planes, Namespace: fmt.Sprintf("bench-%d", n)})
	if err != nil {
		return 0, 0, "", err
	}
	cfg, err := rollout.Load(lab.File)
	if err != nil {
		return 0, 0, "", err
	}
	run := func() (time.Duration, int, int, error) {
		since := az.RequestLog().Last()
		start := time.Now()
		report, err := rollout.Run(ctx, rollout.Options{Config: cfg, Azure: lab.Azure, Parallel: 10})
		took := time.Since(start)
		if err != nil {
			return 0, 0, 0, err
		}
		if report.Failed() {
			for _, c := range report.Clusters {
				for _, s := range c.Steps {
					if s.Outcome == rollout.Failed {
						return 0, 0, 0, fmt.Errorf("%s %s failed: %s", c.Cluster, s.Step, s.Detail)
					}
				}
			}
		}
		all := az.Requests(reqlog.Filter{Service: "arm", Since: since})
		writes := 0
		for _, e := range all {
			if e.Method != http.MethodGet && e.Method != http.MethodHead {
				writes++
			}
		}
		return took, len(all), writes, nil
	}
	cold, coldAll, coldWrites, err := run()
	if err != nil {
		return 0, 0, "", err
	}
	warm, warmAll, warmWrites, err := run()
	if err != nil {
		return 0, 0, "", err
	}
	perCluster = fmt.Sprintf("first run %.1f (%.1f writes); re-run %.1f (%.1f writes)",
		float64(coldAll)/float64(n), float64(coldWrites)/float64(n), float64(warmAll)/float64(n), float64(warmWrites)/float64(n))
	return cold, warm, perCluster, nil
}

func rolloutSeconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func rolloutRatio(d, base time.Duration) string {
	if r := ratio(d.Seconds(), base.Seconds()); r != "" {
		return r + " one cluster"
	}
	return ""
}
