package storage

import (
	"context"
	"crypto/rand"
	_ "embed" // the preload hook
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The Azurite process. One Azurite serves every account: the front authorizes per account and
// forwards with the cloud's own key, which hook.js makes valid for every account name. Kept
// small and apart so that a shared engine supervisor can replace it.

//go:embed hook.js
var hookJS []byte

// Services are the data planes Azurite serves.
var Services = []string{"blob", "queue", "table"}

// AzuriteOptions configure the Azurite process.
type AzuriteOptions struct {
	// Dir is the install hack/install-azurite.sh made (DIR/node_modules/azurite); "" finds
	// bin/azurite as DefaultAzuriteDir does.
	Dir string
	// Node runs Azurite; "" is Dir's sibling debian-node/node when present, else node on PATH.
	Node string
	// DataDir holds Azurite's data (its --location), its pid file and its log.
	DataDir string
	// StartTimeout bounds one start (Azurite loads for seconds on a busy machine); 0 = 3 minutes.
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Azurite is the supervised process: started on first use (or Start), started again on the
// next use after it died, stopped by Close.
type Azurite struct {
	o   AzuriteOptions
	key []byte // the cloud's key of every Azurite account; new at each cloud start

	mu     sync.Mutex
	run    *azuriteRun
	closed bool
}

type azuriteRun struct {
	cmd   *exec.Cmd
	ready chan struct{} // closed once ports is complete or err is set
	ports map[string]int
	err   error
	done  chan struct{} // closed when the process has exited
	exit  error
}

// ErrAzuriteNotInstalled is returned when no Azurite install is found.
var ErrAzuriteNotInstalled = errors.New("azurite is not installed: run `make azurite` (hack/install-azurite.sh)")

// NewAzurite prepares the process; nothing runs until Start or the first Endpoint.
func NewAzurite(o AzuriteOptions) *Azurite {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 3 * time.Minute
	}
	key := make([]byte, 64)
	_, _ = rand.Read(key)
	return &Azurite{o: o, key: key}
}

// Key is the key every Azurite account accepts.
func (a *Azurite) Key() []byte { return a.key }

// DefaultAzuriteDir finds bin/azurite: $CERULEAN_BIN_DIR/azurite, else azurite beside the
// running executable, else bin/azurite of the enclosing cerulean checkout (tests).
func DefaultAzuriteDir() (string, error) {
	var candidates []string
	if d := os.Getenv("CERULEAN_BIN_DIR"); d != "" {
		candidates = append(candidates, filepath.Join(d, "azurite"))
	}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "azurite"))
	}
	if dir, err := os.Getwd(); err == nil {
		for {
			if isFile(filepath.Join(dir, "go.mod")) && isFile(filepath.Join(dir, "hack", "install-azurite.sh")) {
				candidates = append(candidates, filepath.Join(dir, "bin", "azurite"))
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	for _, c := range candidates {
		if isFile(filepath.Join(c, "node_modules", "azurite", "dist", "src", "azurite.js")) {
			return filepath.Abs(c)
		}
	}
	return "", ErrAzuriteNotInstalled
}

func isFile(p string) bool {
	st, err := os.Stat(p) //nolint:gosec // p is under the cloud's data dir
	return err == nil && !st.IsDir()
}

// Start starts Azurite when it does not run, without waiting for it to listen.
func (a *Azurite) Start() error {
	_, err := a.current()
	return err
}

// Endpoint returns http://127.0.0.1:PORT of service, starting Azurite if needed and waiting
// until it listens.
func (a *Azurite) Endpoint(ctx context.Context, service string) (string, error) {
	run, err := a.current()
	if err != nil {
		return "", err
	}
	select {
	case <-run.ready:
	case <-ctx.Done():
		return "", fmt.Errorf("wait for azurite: %w", ctx.Err())
	}
	if run.err != nil {
		return "", run.err
	}
	return "http://127.0.0.1:" + strconv.Itoa(run.ports[service]), nil
}

// Wait starts Azurite when it does not run and waits until it listens: nil, or the reason it
// did not start (what a storage account's create reports).
func (a *Azurite) Wait(ctx context.Context) error {
	_, err := a.Endpoint(ctx, Services[0])
	return err
}

// Ready reports, without waiting, whether Azurite runs and listens.
func (a *Azurite) Ready() bool {
	a.mu.Lock()
	run := a.run
	a.mu.Unlock()
	if run == nil {
		return false
	}
	select {
	case <-run.done:
		return false
	case <-run.ready:
		return run.err == nil
	default:
		return false
	}
}

// Running reports whether an Azurite process of this cloud is alive.
func (a *Azurite) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.run == nil {
		return false
	}
	select {
	case <-a.run.done:
		return false
	default:
		return true
	}
}

// PID is the process id of the running Azurite, 0 when none runs.
func (a *Azurite) PID() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.run == nil || a.run.cmd.Process == nil {
		return 0
	}
	return a.run.cmd.Process.Pid
}

// current returns the live run, starting one when there is none (or the last one died).
func (a *Azurite) current() (*azuriteRun, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errors.New("azurite: the cloud is closing")
	}
	if a.run != nil {
		select {
		case <-a.run.done:
			a.o.Logger.Warn("Azurite exited; starting it again", "err", a.run.exit)
		default:
			return a.run, nil
		}
	}
	run, err := a.start()
	if err != nil {
		return nil, err
	}
	a.run = run
	return run, nil
}

// nodeFlags keep an idle Azurite smaller (issue 23: 160–200 MiB after the bench's transfers
// with Node's defaults, budget 150): V8's young generation stays at 1 MiB semi-spaces instead of
// growing to 16 MiB ones after a burst of requests, and --optimize-for-size trades V8's speed for
// memory: 132 MiB idle against 154 without it, for 5% less of Azurite's own blob throughput on an
// idle machine (docs/benchmarks.md; a run at load 20 had seemed several times slower).
var nodeFlags = []string{"--max-semi-space-size=1", "--optimize-for-size"}

// mallocEnv makes glibc give the large buffers of a transfer back to the kernel when they are
// freed: a fixed mmap threshold (glibc otherwise raises it to the largest buffer freed, and
// keeps later ones in a heap it rarely trims) and fewer arenas to keep free memory in.
var mallocEnv = []string{"MALLOC_ARENA_MAX=2", "MALLOC_MMAP_THRESHOLD_=131072", "MALLOC_TRIM_THRESHOLD_=131072"}

var listening = regexp.MustCompile(`Azurite (Blob|Queue|Table) service is successfully listening at http://[^:]+:(\d+)`)

func (a *Azurite) pidFile() string { return filepath.Join(a.o.DataDir, "azurite.pid") }

func (a *Azurite) start() (*azuriteRun, error) {
	dir := a.o.Dir
	if dir == "" {
		d, err := DefaultAzuriteDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	node := a.o.Node
	if node == "" {
		node = filepath.Join(filepath.Dir(dir), "debian-node", "node")
		if !isFile(node) {
			node = "node"
		}
	}
	data := filepath.Join(a.o.DataDir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("create azurite data dir: %w", err)
	}
	// An Azurite left by a cloud that was killed (it got SIGTERM and may still be saving) must
	// be gone before another one opens the same data.
	stopStale(a.pidFile(), data)
	hook := filepath.Join(a.o.DataDir, "hook.js")
	if err := os.WriteFile(hook, hookJS, 0o600); err != nil {
		return nil, fmt.Errorf("write azurite hook: %w", err)
	}
	logPath := filepath.Join(a.o.DataDir, "azurite.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open azurite log: %w", err)
	}
	// Azurite's output goes to the file, never to a pipe of ours: after a kill -9 of the cloud
	// a write to a pipe nobody reads would fail Azurite's shutdown before it saves.
	offset, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("open azurite log: %w", err)
	}
	cmd := exec.Command(node, append(slices.Clone(nodeFlags), "--require", hook, filepath.Join(dir, "node_modules", "azurite", "dist", "src", "azurite.js"),
		"--location", data, "--blobHost", "127.0.0.1", "--blobPort", "0", "--queueHost", "127.0.0.1", "--queuePort", "0",
		"--tableHost", "127.0.0.1", "--tablePort", "0", "--skipApiVersionCheck", "--disableTelemetry")...)
	cmd.Env = append(os.Environ(), mallocEnv...)
	cmd.Env = append(cmd.Env, "CERULEAN_AZURITE_KEY="+base64.StdEncoding.EncodeToString(a.key), "CERULEAN_AZURITE_DIR="+dir)
	// SIGTERM, not SIGKILL, when the cloud dies: Azurite then saves its metadata (it saves
	// every few seconds otherwise), so no acknowledged write is lost.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	run := &azuriteRun{cmd: cmd, ready: make(chan struct{}), ports: map[string]int{}, done: make(chan struct{})}
	// Pdeathsig fires when the forking thread exits: fork on a thread that stays until the child exits.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logFile.Close()
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("start azurite (%s): %w", node, err)
			return
		}
		started <- nil
		_ = os.WriteFile(a.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
		run.exit = cmd.Wait()
		close(run.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	go a.watch(run, logPath, offset)
	a.o.Logger.Info("Azurite starting", "pid", cmd.Process.Pid, "dataDir", data)
	return run, nil
}

// watch reads Azurite's log from offset and marks the run ready once all three services
// listen, or failed when it exits or takes too long first.
func (a *Azurite) watch(run *azuriteRun, logPath string, offset int64) {
	deadline := time.Now().Add(a.o.StartTimeout)
	fail := func(err error) {
		run.err = err
		close(run.ready)
		_ = run.cmd.Process.Kill()
	}
	for {
		exited := false
		select {
		case <-run.done:
			exited = true
		case <-time.After(100 * time.Millisecond):
		}
		var out []byte // this run's output
		if b, err := os.ReadFile(logPath); err == nil && int64(len(b)) >= offset {
			out = b[offset:]
			for _, m := range listening.FindAllStringSubmatch(string(out), -1) {
				port, _ := strconv.Atoi(m[2])
				run.ports[strings.ToLower(m[1])] = port
			}
		}
		switch {
		case len(run.ports) == len(Services):
			close(run.ready)
			a.o.Logger.Info("Azurite ready", "ports", run.ports)
			return
		case exited:
			fail(fmt.Errorf("azurite exited before listening (%w)%s; see %s", run.exit, lastLine(out), logPath))
			return
		case time.Now().After(deadline):
			fail(fmt.Errorf("azurite did not listen within %s; see %s", a.o.StartTimeout, logPath))
			return
		}
	}
}

// lastLine is the last line of Azurite's output that names why it stopped (Node prints the
// thrown error, then its stack and its version), as ": LINE" clipped, or "".
func lastLine(out []byte) string {
	lines := strings.Split(string(out), "\n")
	last := ""
	for i := len(lines) - 1; i >= 0 && last == ""; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "at ") && !strings.HasPrefix(l, "Node.js v") {
			last = l
		}
	}
	if last == "" {
		return ""
	}
	if r := []rune(last); len(r) > 300 {
		last = string(r[:300]) + "…"
	}
	return ": " + last
}

// Close stops Azurite: SIGTERM (it saves its data), then SIGKILL after a grace period.
func (a *Azurite) Close() error {
	a.mu.Lock()
	a.closed = true
	run := a.run
	a.run = nil
	a.mu.Unlock()
	if run == nil {
		return nil
	}
	err := stopRun(run, 20*time.Second)
	_ = os.Remove(a.pidFile())
	return err
}

func stopRun(run *azuriteRun, grace time.Duration) error {
	select {
	case <-run.done:
		return nil
	default:
	}
	_ = run.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-run.done:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-run.cmd.Process.Pid, syscall.SIGKILL)
		<-run.done
		return fmt.Errorf("azurite did not stop within %s; killed", grace)
	}
}

// stopStale ends the Azurite named by pidFile if it still runs on data.
func stopStale(pidFile, data string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	alive := func() bool {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		return err == nil && strings.Contains(string(cmdline), data)
	}
	if !alive() {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for range 200 {
		if !alive() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
