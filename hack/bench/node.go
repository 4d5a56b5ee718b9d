package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// containerd, images imported, the kubelet registers) and again on the same one (warm); one pod
// started alone, several times, for its latency and the CPU a pod start costs (the stack's
// processes, and the whole machine's); then benchPods pods created at once, against the floor
// the machine's CPU per pod start sets on its cores; then `cerulean-local up` to everything
// ready, cold and warm. Needs root.
func benchNode(ctx context.Context, env benchEnv) ([]row, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the local node needs root")
	}
	rows, err := benchNodePods(ctx, env)
	if err != nil {
		return nil, err
	}
	upRows, err := benchUp(ctx, env)
	if err != nil {
		return nil, err
	}
	return append(rows, upRows...), nil
}

// soloPods is how many pods are started one at a time for the single-pod figures.
const soloPods = 5

func benchNodePods(ctx context.Context, env benchEnv) ([]row, error) {
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

	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	var solo []time.Duration
	cpuBefore, busyBefore := stackCPU(env.binDir), machineBusy()
	for i := range soloPods {
		lat, _, err := podStartLatency(ctx, cs, fmt.Sprintf("solo-%d", i), 1)
		if err != nil {
			return nil, err
		}
		solo = append(solo, lat[0])
	}
	cpuPerPod := (stackCPU(env.binDir) - cpuBefore) / soloPods
	busyPerPod := (machineBusy() - busyBefore) / soloPods
	slices.Sort(solo)

	cpuBefore, busyBefore = stackCPU(env.binDir), machineBusy()
	lat, all, err := podStartLatency(ctx, cs, "bench", benchPods)
	if err != nil {
		return nil, err
	}
	cpuAll, busyAll := stackCPU(env.binDir)-cpuBefore, machineBusy()-busyBefore
	cores := float64(runtime.NumCPU())
	floor := time.Duration(busyPerPod * benchPods / cores * float64(time.Second))
	p50, p99 := lat[len(lat)*50/100], lat[len(lat)*99/100]
	return []row{
		{benchmark: "node Ready, cold (fresh data dir, images imported)", result: ready[0].Round(10 * time.Millisecond).String()},
		{benchmark: "node Ready, warm (same data dir)", result: ready[1].Round(10 * time.Millisecond).String(), vsBaseline: ratio(ready[1].Seconds(), ready[0].Seconds()) + " of cold"},
		{benchmark: fmt.Sprintf("one pod alone, create to running, median of %d (warm node; goal under 1s)", soloPods), result: solo[len(solo)/2].Round(10 * time.Millisecond).String()},
		{benchmark: "CPU seconds per pod start (the node's and control plane's processes, one pod alone)", result: fmt.Sprintf("%.2fs", cpuPerPod)},
		{benchmark: "CPU seconds per pod start (the whole machine: the kernel's work, runc, CNI plugins and the pod's own start too; one pod alone)", result: fmt.Sprintf("%.2fs", busyPerPod),
			vsBaseline: ratio(busyPerPod, cpuPerPod) + " of the processes'"},
		{benchmark: fmt.Sprintf("pod start, create to running, p50 of %d created at once", benchPods), result: p50.Round(10 * time.Millisecond).String()},
		{benchmark: fmt.Sprintf("pod start, create to running, p99 of %d created at once", benchPods), result: p99.Round(10 * time.Millisecond).String()},
		{benchmark: fmt.Sprintf("pods per minute (%d pods, all running after %s)", benchPods, all.Round(10*time.Millisecond)), result: fmt.Sprintf("%.0f", benchPods/all.Minutes())},
		{benchmark: fmt.Sprintf("CPU floor for %d pods: the machine's CPU per pod start × %d / %d cores (goal: all running within 1.2×)", benchPods, benchPods, runtime.NumCPU()),
			result: floor.Round(10 * time.Millisecond).String(), vsBaseline: ratio(all.Seconds(), floor.Seconds()) + " (all running / floor)"},
		{benchmark: fmt.Sprintf("CPU seconds per pod start, %d at once (processes; whole machine)", benchPods), result: fmt.Sprintf("%.2fs; %.2fs", cpuAll/benchPods, busyAll/benchPods),
			vsBaseline: ratio(busyAll/benchPods, busyPerPod) + " of one alone (whole machine)"},
		{benchmark: fmt.Sprintf("the machine's cores busy while the %d start", benchPods), result: fmt.Sprintf("%.0f%%", 100*busyAll/(cores*all.Seconds()))},
	}, nil
}

// stackCPU is the CPU time, in seconds, the processes started from binDir (etcd, kube-apiserver,
// kube-scheduler, containerd, its shims, the kubelet) have used so far, their waited-for
// children (runc) included: the cost of running pods, without the machine's other work.
func stackCPU(binDir string) float64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !strings.HasPrefix(exe, binDir+"/") {
			continue
		}
		pid, _ := strconv.Atoi(e.Name())
		fields := statFields(pid) // utime, stime, cutime, cstime are [11] to [14]
		if len(fields) < 15 {
			continue
		}
		for _, f := range fields[11:15] {
			n, _ := strconv.ParseInt(f, 10, 64)
			ticks += n
		}
	}
	return float64(ticks) / clockTicks
}

// machineBusy is the CPU time, in seconds, all of the machine's cores have spent not idle so far
// (/proc/stat: user, nice, system, irq, softirq, steal): a pod start's whole cost, the kernel's
// work for its namespaces, cgroups, mounts and veth and the programs not in binDir included.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, _ := strconv.ParseInt(fields[i], 10, 64)
		ticks += n
	}
	return float64(ticks) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux port Go runs on.
const clockTicks = 100

// podStartLatency creates n pods named PREFIX-NN at once and returns each one's time from its
// create call to its container running, sorted, and the time until all ran. It watches rather
// than polls, so that its own reads do not add to the CPU the stack is measured spending.
func podStartLatency(ctx context.Context, cs kubernetes.Interface, prefix string, n int) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	defer w.Stop()
	created := map[string]time.Time{}
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("%s-%02d", prefix, i)
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
	for len(running) < n {
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("wait for %d pods: %d running: %w", n, len(running), ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, 0, fmt.Errorf("wait for %d pods: the watch ended with %d running", n, len(running))
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if _, mine := created[p.Name]; !mine {
				continue
			}
			if _, seen := running[p.Name]; !seen && p.Status.Phase == corev1.PodRunning {
				running[p.Name] = time.Now()
			}
		}
	}
	all := time.Since(start)
	var lat []time.Duration
	for name, at := range running {
		lat = append(lat, at.Sub(created[name]))
	}
	slices.Sort(lat)
	return lat, all, nil
}
