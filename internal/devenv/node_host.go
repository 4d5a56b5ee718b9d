package devenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cerulean/cerulean/internal/fsutil"
)

// The node changes this machine beyond its data directory: a bridge, iptables rules, sysctls,
// cgroups, mounts, and a few files the kubelet and containerd place at fixed paths. One node runs
// on a machine at a time; a lock and a record in hostDir say which, so that a node started after
// one that was killed (kill -9 leaves no chance to clean up) undoes what the dead one did.
var hostDir = "/run/cerulean"

const (
	hostLockFile   = "node.lock"
	hostRecordFile = "node.json"
	// iptables chains of our own, jumped to from FORWARD and INPUT.
	forwardChain = "CERULEAN-FORWARD"
	inputChain   = "CERULEAN-INPUT"
)

// hostRecord is what a node changed on the machine, written before it changes anything.
type hostRecord struct {
	PID     int    `json:"pid"`
	DataDir string `json:"dataDir"`
	NodeDir string `json:"nodeDir"`
	// KubeletDir is the kubelet's root directory, removed whole once nothing is mounted in it.
	KubeletDir string `json:"kubeletDir"`
	Socket     string `json:"socket"`
	// Sysctls holds the values to restore: the bridge plugin turns on ip_forward and the kubelet
	// sets its kernel tunables at start.
	Sysctls map[string]string `json:"sysctls"`
	// Created lists fixed paths outside the data directory that did not exist before the node:
	// they are removed whole; in those that existed, only the node's entries are.
	Created []string `json:"created"`
}

// NodeSysctls are the sysctls a node changes and restores when it stops.
var NodeSysctls = []string{
	"net.ipv4.ip_forward",
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// Fixed paths the kubelet, containerd and the CNI plugins write to whatever their configuration.
var fixedPaths = []string{"/var/lib/cni", "/var/log/containers", "/run/containerd", "/var/lib/kubelet"}

// ErrNodeInUse reports that another node runs on this machine.
var ErrNodeInUse = errors.New("another cerulean node runs on this machine")

func readHostRecord() (*hostRecord, error) {
	b, err := os.ReadFile(filepath.Join(hostDir, hostRecordFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read node record: %w", err)
	}
	var r hostRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read node record %s: %w", filepath.Join(hostDir, hostRecordFile), err)
	}
	return &r, nil
}

func writeHostRecord(r *hostRecord) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write node record: %w", err)
	}
	return fsutil.WriteFileAtomic(filepath.Join(hostDir, hostRecordFile), b, 0o600)
}

func removeHostRecord() error {
	if err := os.Remove(filepath.Join(hostDir, hostRecordFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove node record: %w", err)
	}
	return nil
}

// newHostRecord saves the machine's state before a node changes it.
func newHostRecord(dataDir string, n nodePaths) (*hostRecord, error) {
	r := &hostRecord{PID: os.Getpid(), DataDir: dataDir, NodeDir: n.dir, KubeletDir: n.kubeletRoot(), Socket: n.socket(), Sysctls: map[string]string{}}
	for _, k := range NodeSysctls {
		v, err := readSysctl(k)
		if err != nil {
			return nil, err
		}
		r.Sysctls[k] = v
	}
	for _, p := range fixedPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			r.Created = append(r.Created, p)
		}
	}
	return r, nil
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

func readSysctl(key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(key))
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", key, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func writeSysctl(key, value string) error {
	if err := os.WriteFile(sysctlPath(key), []byte(value), 0o644); err != nil { //nolint:gosec // a sysctl
		return fmt.Errorf("restore sysctl %s: %w", key, err)
	}
	return nil
}

// run runs a host command and returns its combined output in the error.
func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// teardown undoes everything a node did to the machine, whether it stopped or was killed:
// container processes and shims, mounts, cgroups, links, iptables rules, sysctls and files at
// fixed paths. It carries on past errors and returns them all.
func teardown(r *hostRecord) error {
	var errs []error
	killNodeProcesses(r)
	errs = append(errs, unmountUnder(r.NodeDir))
	if r.KubeletDir != "" {
		// Only once nothing is mounted there: a subPath bind mount leads to the host's files.
		if err := unmountUnder(r.KubeletDir); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, os.RemoveAll(r.KubeletDir))
		}
	}
	errs = append(errs, removeCgroups())
	errs = append(errs, removeNetwork(), removeNodeTables())
	for _, k := range NodeSysctls {
		if v, ok := r.Sysctls[k]; ok {
			if cur, err := readSysctl(k); err != nil || cur != v {
				errs = append(errs, writeSysctl(k, v))
			}
		}
	}
	errs = append(errs, cleanFixedPaths(r))
	return errors.Join(errs...)
}

// killNodeProcesses kills every container (each is in the kubelet's kubepods cgroups), the
// containerd shims of this node's socket, and containerd, the kubelet and the Secrets Store CSI
// Driver if they outlived their parent; then waits, bounded, for them to be gone.
func killNodeProcesses(r *hostRecord) {
	for range 3 {
		pids := nodeProcesses(r, true)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			alive := 0
			for _, pid := range pids {
				if processAlive(pid) {
					alive++
				}
			}
			if alive == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// nodeProcesses lists the live processes of the node r describes: by command line, and with
// pods, every process in the kubepods cgroups.
func nodeProcesses(r *hostRecord, pods bool) []int {
	seen := map[int]bool{}
	var procFiles []string
	if pods {
		procFiles = cgroupProcFiles()
	}
	for _, procs := range procFiles {
		b, err := os.ReadFile(procs)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				seen[pid] = true
			}
		}
	}
	entries, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, e := range entries {
		b, err := os.ReadFile(e)
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		name := filepath.Base(argv[0])
		ours := bytes.Contains(b, []byte(r.NodeDir+"/")) || r.KubeletDir != "" && bytes.Contains(b, []byte(r.KubeletDir))
		switch name {
		case "containerd-shim-runc-v2", "containerd", "kubelet", "kube-proxy", "coredns", SecretsStoreDriverBinary:
		default:
			ours = false
		}
		if ours {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(e))); err == nil && pid != os.Getpid() {
				seen[pid] = true
			}
		}
	}
	var out []int
	for pid := range seen {
		if processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// processAlive reports a process that exists and is not a zombie. A killed process's main
// thread can be a zombie while its other threads still exit, holding its files and ports: such a
// process counts as alive until it has one thread left.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	var state string
	threads := 1
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "State":
			state = strings.TrimSpace(v)
		case "Threads":
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return !strings.HasPrefix(state, "Z") || threads > 1
}

// kubepodsDirs are the kubelet's pod cgroups in every mounted hierarchy (v1 and v2).
func kubepodsDirs() []string {
	var dirs []string
	if d := "/sys/fs/cgroup/kubepods"; isDir(d) {
		dirs = append(dirs, d)
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	for _, d := range hierarchies {
		if isDir(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func cgroupProcFiles() []string {
	var files []string
	for _, d := range kubepodsDirs() {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && e.Name() == "cgroup.procs" {
				files = append(files, p)
			}
			return nil
		})
	}
	return files
}

// removeCgroups removes the kubepods cgroups, deepest first, once their processes are gone.
func removeCgroups() error {
	var errs []error
	for _, d := range kubepodsDirs() {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, dir := range dirs {
			var err error
			for range 50 { // a cgroup is busy for a moment after its last process exits
				if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount at or below dir (container root filesystems, shm, network
// namespaces, the kubelet's volumes), deepest first.
func unmountUnder(dir string) error {
	var errs []error
	for range 3 {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return fmt.Errorf("read mounts: %w", err)
		}
		var targets []string
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			mp := unescapeMount(f[4])
			if hasPrefixPath(mp, dir) {
				targets = append(targets, mp)
			}
		}
		if len(targets) == 0 {
			return nil
		}
		sort.Slice(targets, func(i, j int) bool { return len(targets[i]) > len(targets[j]) })
		errs = errs[:0]
		for _, t := range targets {
			if err := syscall.Unmount(t, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", t, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cleanFixedPaths removes what the node left at fixed paths: CNI's result cache, the kubelet's
// links to container logs, containerd's shim sockets and runtime directory.
func cleanFixedPaths(r *hostRecord) error {
	var errs []error
	results, _ := filepath.Glob("/var/lib/cni/results/" + cniNetwork + "-*")
	for _, p := range results {
		errs = append(errs, removeIfExists(p))
	}
	links, _ := filepath.Glob("/var/log/containers/*")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && hasPrefixPath(target, r.NodeDir) {
			errs = append(errs, removeIfExists(l))
		}
	}
	// Shims listen under /run/containerd/s whatever containerd's state directory; with no
	// containerd of the system's own there, none of those sockets is anyone else's.
	if _, err := os.Stat("/run/containerd/containerd.sock"); errors.Is(err, os.ErrNotExist) {
		errs = append(errs, os.RemoveAll("/run/containerd/s"))
	}
	for _, p := range r.Created {
		errs = append(errs, os.RemoveAll(p))
	}
	return errors.Join(errs...)
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// NodeLeftovers lists what a node on dataDir left on this machine after it stopped: processes,
// mounts, the bridge, iptables chains, pod cgroups, the machine record. Empty means clean. While
// another data directory's node runs (tests in other packages wait for the machine's node), the
// machine-wide parts are that node's and are not counted.
func NodeLeftovers(dataDir string) []string {
	var left []string
	machineWide := true
	if lock, err := lockHost(context.Background(), 0, func(string) {}); err == nil {
		lock.release()
	} else if r, rerr := readHostRecord(); rerr == nil && r != nil && r.DataDir != dataDir {
		machineWide = false
	}
	nodeDir := filepath.Join(dataDir, "node")
	ours := &hostRecord{NodeDir: nodeDir}
	if machineWide {
		ours.KubeletDir = filepath.Join(hostDir, "kubelet")
	}
	for _, pid := range nodeProcesses(ours, machineWide) {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		left = append(left, fmt.Sprintf("process %d (%s)", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			mp := unescapeMount(f[4])
			if hasPrefixPath(mp, nodeDir) || machineWide && (hasPrefixPath(mp, "/run/containerd") || hasPrefixPath(mp, filepath.Join(hostDir, "kubelet"))) {
				left = append(left, "mount "+f[4])
			}
		}
	}
	if !machineWide {
		return left
	}
	if linkExists(Bridge) {
		left = append(left, "bridge "+Bridge)
	}
	for _, chain := range []string{forwardChain, inputChain} {
		if _, err := run("iptables", "-w", "5", "-S", chain); err == nil {
			left = append(left, "iptables chain "+chain)
		}
	}
	if _, err := run("iptables", "-w", "5", "-t", "nat", "-S", natChain); err == nil {
		left = append(left, "iptables nat chain "+natChain)
	}
	left = append(left, nodeTablesLeft()...)
	for _, d := range kubepodsDirs() {
		left = append(left, "cgroup "+d)
	}
	if r, err := readHostRecord(); err != nil || r != nil {
		owner := fmt.Sprint(err)
		if r != nil {
			owner = fmt.Sprintf("pid %d, data directory %s", r.PID, r.DataDir)
		}
		left = append(left, fmt.Sprintf("record %s (%s)", filepath.Join(hostDir, hostRecordFile), owner))
	}
	return left
}

// CleanupStaleNode undoes what a node that did not stop (its process was killed) left on this
// machine. It does nothing while a node runs; StartNode does the same before it starts.
func CleanupStaleNode(ctx context.Context) error {
	lock, err := lockHost(ctx, 0, func(string) {})
	if errors.Is(err, ErrNodeInUse) {
		return nil
	}
	if err != nil {
		return err
	}
	defer lock.release()
	stale, err := readHostRecord()
	if err != nil || stale == nil {
		return err
	}
	if err := teardown(stale); err != nil {
		return fmt.Errorf("clean up after the previous node: %w", err)
	}
	return removeHostRecord()
}
