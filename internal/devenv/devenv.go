// Package devenv runs a real local Kubernetes control plane (etcd, kube-apiserver and
// kube-controller-manager built from source into bin/) as child processes. `cerulean-local up` and the
// integration tests share it.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configure Start.
type Options struct {
	// DataDir holds certificates, etcd's data, chosen ports, logs and the kubeconfig. Starting
	// again on the same directory resumes the same cluster at the same addresses.
	DataDir string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager; empty means DefaultBinDir().
	BinDir string
	// APIServerPort is used on the first start only; 0 picks a free port.
	APIServerPort int
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// ReadyTimeout bounds the wait for each component; 0 means two minutes.
	ReadyTimeout time.Duration
	// EncryptionConfig is kube-apiserver's EncryptionConfiguration file
	// (--encryption-provider-config), e.g. a KMS plugin for Secrets; empty: none.
	EncryptionConfig string
	// APIServerEnv is added to kube-apiserver's environment (NAME=value), e.g. a benchmark's
	// GOGC; empty: this process's environment as it is.
	APIServerEnv []string
}

// ControlPlane is a running local control plane.
type ControlPlane struct {
	// DataDir is the absolute data directory.
	DataDir string
	// Kubeconfig is the path of the admin kubeconfig (cluster-admin through system:masters).
	Kubeconfig string
	// APIServerURL is kube-apiserver's HTTPS address.
	APIServerURL string
	// IssuerURL is the service-account issuer; its discovery documents are readable anonymously.
	IssuerURL string
	// CACertPEM is the CA that signed the serving certificates (kube-apiserver, the issuer).
	CACertPEM []byte
	// RESTConfig authenticates as the admin.
	RESTConfig *rest.Config
	// EtcdURL is etcd's client address (plain HTTP on loopback), for reading storage directly.
	EtcdURL string

	children []*child // in start order
	lock     *os.File
	logs     string
	binDir   string
	ports    ports
	pki      pkiFiles
}

// Start starts the control plane and returns once every component is ready, or an error after
// stopping what it started.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.DataDir == "" {
		return nil, errors.New("start control plane: no data directory given")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	if err := checkBinaries(binDir); err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}

	lock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), lock: lock, logs: filepath.Join(dataDir, "logs"), binDir: binDir}
	defer func() {
		if err != nil {
			cp.Stop() // the caller gets no handle to stop what was started
		}
	}()
	if err := os.MkdirAll(cp.logs, 0o750); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}

	pki := pkiFiles{dir: filepath.Join(dataDir, "pki")}
	if err := pki.ensure(time.Now()); err != nil {
		return nil, err
	}
	if cp.CACertPEM, err = os.ReadFile(pki.caCert()); err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	p, err := loadOrChoosePorts(filepath.Join(dataDir, "ports.json"), opts.APIServerPort)
	if err != nil {
		return nil, err
	}
	if p, err = refreshControlPlanePorts(filepath.Join(dataDir, "ports.json"), p); err != nil {
		return nil, err
	}
	if err := p.checkFree(); err != nil {
		return nil, err
	}
	cp.ports, cp.pki = p, pki
	cp.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(p.APIServer)
	cp.IssuerURL = cp.APIServerURL
	cp.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(p.EtcdClient)
	if cp.RESTConfig, err = writeKubeconfigs(dataDir, cp.APIServerURL, pki); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}

	fmt.Fprintf(progress, "starting etcd on 127.0.0.1:%d…\n", p.EtcdClient)
	if err := cp.start(ctx, "etcd", filepath.Join(binDir, "etcd"), etcdArgs(dataDir, p), nil); err != nil {
		return nil, err
	}
	if err := cp.waitReady(ctx, timeout, "etcd", etcdHealthy(p.EtcdClient)); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "starting kube-apiserver on %s…\n", cp.APIServerURL)
	args := apiServerArgs(cp, p, pki)
	if opts.EncryptionConfig != "" {
		args = append(args, "--encryption-provider-config="+opts.EncryptionConfig)
	}
	if err := cp.start(ctx, "kube-apiserver", filepath.Join(binDir, "kube-apiserver"), args, opts.APIServerEnv); err != nil {
		return nil, err
	}
	if err := cp.waitReady(ctx, timeout, "kube-apiserver", apiServerReady(cs)); err != nil {
		return nil, err
	}
	if err := bootstrapRBAC(ctx, cs); err != nil {
		return nil, err
	}
	fmt.Fprintln(progress, "starting kube-controller-manager…")
	if err := cp.start(ctx, "kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"), controllerManagerArgs(dataDir, p, pki), nil); err != nil {
		return nil, err
	}
	if err := cp.waitReady(ctx, timeout, "kube-controller-manager", controllerManagerReady(cs, p.ControllerManager, cp.CACertPEM)); err != nil {
		return nil, err
	}
	return cp, nil
}

// EnsureCA makes the data directory's certificates when missing (as Start does) and returns the
// CA that signs the control plane's serving certificates: what a client that must trust the
// cluster before it runs (the local cloud fetching its issuer's keys) is given.
func EnsureCA(dataDir string) ([]byte, error) {
	pki := pkiFiles{dir: filepath.Join(dataDir, "pki")}
	if err := pki.ensure(time.Now()); err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(pki.caCert())
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	return ca, nil
}

// Stop stops the components in reverse order, each with a grace period, and releases the data
// directory. It is safe to call more than once.
func (cp *ControlPlane) Stop() {
	for i := len(cp.children) - 1; i >= 0; i-- {
		cp.children[i].stop(15 * time.Second)
	}
	cp.children = nil
	if cp.lock != nil {
		_ = cp.lock.Close()
		cp.lock = nil
	}
}

// Exited returns a channel that is closed when any component exits on its own, and a function
// that tells which one and why.
func (cp *ControlPlane) Exited() (<-chan struct{}, func() error) {
	return exitedOf(cp.children)
}

func exitedOf(children []*child) (<-chan struct{}, func() error) {
	ch := make(chan struct{})
	for _, c := range children {
		go func() {
			<-c.done
			select {
			case <-ch:
			default:
				close(ch)
			}
		}()
	}
	return ch, func() error {
		for _, c := range children {
			if err := c.exited(); err != nil {
				return err
			}
		}
		return nil
	}
}

func (cp *ControlPlane) start(_ context.Context, name, bin string, args, env []string) error {
	c, err := startChild(name, bin, args, filepath.Join(cp.logs, name+".log"), env)
	if err != nil {
		return err
	}
	cp.children = append(cp.children, c)
	return nil
}

// waitReady polls ready until it succeeds, a child exits, the timeout passes or ctx ends.
func (cp *ControlPlane) waitReady(ctx context.Context, timeout time.Duration, name string, ready func(context.Context) error) error {
	return waitFor(ctx, timeout, name, cp.logs, cp.children, ready)
}

// waitFor polls ready until it succeeds, one of children exits, the timeout passes or ctx ends.
func waitFor(ctx context.Context, timeout time.Duration, name, logs string, children []*child, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		for _, c := range children {
			if err := c.exited(); err != nil {
				return fmt.Errorf("wait for %s: %w", name, err)
			}
		}
		start := time.Now()
		err := ready(ctx)
		if err == nil {
			return nil
		}
		// A check the deadline cut short (or a client's rate limiter refused, seeing the
		// deadline near) says nothing new: the last one that ran in full says why.
		if deadline, _ := ctx.Deadline(); last == nil || deadline.Sub(start) > 2*time.Second {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last check: %w; logs in %s)", name, ctx.Err(), last, logs)
		case <-tick.C:
		}
	}
}

// lockDataDir takes an exclusive lock so two control planes never share one data directory.
func lockDataDir(dataDir string) (*os.File, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
	}
	f, err := os.OpenFile(filepath.Join(dataDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("data directory %s is in use by another cerulean process: %w", dataDir, err)
	}
	return f, nil
}

// DefaultBinDir finds bin/: $CERULEAN_BIN_DIR, else the directory of the running executable when
// it holds kube-apiserver (bin/cerulean-local), else bin/ of the enclosing Go module (tests).
func DefaultBinDir() (string, error) {
	if d := os.Getenv("CERULEAN_BIN_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if exe, err := os.Executable(); err == nil {
		if d := filepath.Dir(exe); exists(filepath.Join(d, "kube-apiserver")) {
			return d, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if exists(filepath.Join(dir, "go.mod")) && exists(filepath.Join(dir, "hack", "tools")) {
			return filepath.Join(dir, "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find bin/: set CERULEAN_BIN_DIR or run inside the cerulean repository")
		}
		dir = parent
	}
}

func checkBinaries(binDir string) error {
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if !exists(filepath.Join(binDir, name)) {
			return fmt.Errorf("%s not found in %s: run `make tools` to build the local control plane", name, binDir)
		}
	}
	return nil
}
