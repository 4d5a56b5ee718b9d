package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
)

func init() {
	register(section{title: "Local node", run: benchNode})
}

const benchPods = 50

// benchNode times the local node: from StartNode to Ready on a fresh data directory (cold: empty
// containerd, images imported, the kubelet registers) and again on the same one (warm); then pod
// start latency, from create to the container running, for benchPods pods created at once, and
// the pods per minute that gives. Needs root.
func benchNode(ctx context.Context, env benchEnv) ([]row, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the local node needs root")
	}
	dir, err := os.MkdirTemp(env.scratch, "node-")
	if err != nil {
		return nil, err
	}
	archives, err := images.Build(ctx, images.Options{OutDir: filepath.Join(dir, "images"), Only: []string{images.Pause, images.TestApp}})
	if err != nil {
		return nil, err
	}
	cp, err := devenv.Start(ctx, devenv.Options{DataDir: dir, BinDir: env.binDir})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	opts := devenv.NodeOptions{ProviderID: "azure:///bench", Images: archives, LockWait: time.Minute}
	var ready []time.Duration
	var node *devenv.Node
	for range 2 {
		start := time.Now()
		if node, err = cp.StartNode(ctx, opts); err != nil {
			return nil, err
		}
		ready = append(ready, time.Since(start))
		if len(ready) == 1 {
			if err := node.Stop(); err != nil {
				return nil, err
			}
		}
	}
	defer func() { _ = node.Stop() }()

	lat, all, err := podStartLatency(ctx, kubernetes.NewForConfigOrDie(cp.RESTConfig))
	if err != nil {
		return nil, err
	}
	p50, p99 := lat[len(lat)*50/100], lat[len(lat)*99/100]
	return []row{
		{benchmark: "node Ready, cold (fresh data dir, images imported)", result: ready[0].Round(10 * time.Millisecond).String()},
		{benchmark: "node Ready, warm (same data dir)", result: ready[1].Round(10 * time.Millisecond).String(), vsBaseline: ratio(ready[1].Seconds(), ready[0].Seconds()) + " of cold"},
		{benchmark: fmt.Sprintf("pod start, create to running, p50 of %d created at once", benchPods), result: p50.Round(10 * time.Millisecond).String()},
		{benchmark: fmt.Sprintf("pod start, create to running, p99 of %d created at once", benchPods), result: p99.Round(10 * time.Millisecond).String()},
		{benchmark: fmt.Sprintf("pods per minute (%d pods, all running after %s)", benchPods, all.Round(10*time.Millisecond)), result: fmt.Sprintf("%.0f", benchPods/all.Minutes())},
	}, nil
}

// podStartLatency creates benchPods pods at once and returns each one's time from its create
// call to its container running, sorted, and the time until all ran.
func podStartLatency(ctx context.Context, cs kubernetes.Interface) ([]time.Duration, time.Duration, error) {
	created := map[string]time.Time{}
	start := time.Now()
	for i := range benchPods {
		name := fmt.Sprintf("bench-%02d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []corev1.Container{{Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"}}},
			},
		}
		created[name] = time.Now()
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, 0, err
		}
	}
	running := map[string]time.Time{}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		now := time.Now()
		for _, p := range pods.Items {
			if _, seen := running[p.Name]; !seen && p.Status.Phase == corev1.PodRunning {
				running[p.Name] = now
			}
		}
		return len(running) == benchPods, nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("wait for %d pods: %d running: %w", benchPods, len(running), err)
	}
	all := time.Since(start)
	var lat []time.Duration
	for name, at := range running {
		lat = append(lat, at.Sub(created[name]))
	}
	slices.Sort(lat)
	return lat, all, nil
}
