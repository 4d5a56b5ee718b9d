// Package engines supervises the real database and cache processes behind the local cloud's
// data planes: one PostgreSQL postmaster per flexible server and one redis-server per cache, from
// Debian's packages. The cloud's ARM providers call it when a resource is created, started,
// stopped or deleted, and the cloud calls it at start (to bring back what ran) and at stop (to
// leave nothing behind). Each engine keeps its data under DIR/engines/KIND/NAME of the cloud's
// data dir, answers with a certificate for its Azure name from the cloud's CA, and is killed with
// the cloud if the cloud dies (parent-death signal), so a kill -9 of the cloud leaves no engine
// running; their own write-ahead logs (PostgreSQL's WAL, Redis's append-only file with fsync on
// every write) keep every acknowledged write.
//
// Engines run as an unprivileged user when the cloud runs as root (PostgreSQL refuses root): the
// `postgres` and `redis` users the Debian packages create. Addresses: every engine listens on an
// IPv4 address of its own at its protocol's standard port, in 127.0.0.0/8 or, for pods to reach
// it, in a network the supervisor makes local to the host (addrs.go, net.go).
package engines

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cerulean/cerulean/internal/pki"
)

// ErrNotRunning is returned for an operation on an engine that is not running.
var ErrNotRunning = errors.New("engine not running")

// Options configure a Supervisor.
type Options struct {
	Dir    string  // the cloud's data dir; engines live under Dir/engines
	CA     *pki.CA // issues each engine's serving certificate
	Logger *slog.Logger
	Now    func() time.Time
	// Net is where engines take their addresses when pods must reach them (a /24 of it per
	// data dir, made local to the host: net.go; needs root); zero: 127.0.0.0/8, the host only.
	Net netip.Prefix
}

// Supervisor starts, stops and tracks the engine processes of one cloud.
type Supervisor struct {
	o     Options
	log   *slog.Logger
	block netip.Prefix // the /24 engines' addresses are in

	mu      sync.Mutex
	running map[string]*proc // by key: "postgres/NAME", "redis/NAME"
	closed  bool
}

// proc is one running engine process.
type proc struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited
	err    error         // its exit status, set before done closes
	stderr *tail
	addr   netip.AddrPort
	tls    netip.AddrPort // Redis: the TLS port (addr is then the non-TLS one, if any)
	sock   string         // PostgreSQL: the directory of its Unix socket
	stop   func(p *proc) error

	// Redis: redis-server's own TLS port, and the fronts on its public ports (front.go).
	inner   netip.AddrPort
	gate    *gate
	frontMu sync.Mutex
	fronts  []*front
}

func (p *proc) getFronts() []*front {
	p.frontMu.Lock()
	defer p.frontMu.Unlock()
	return p.fronts
}

// setFronts replaces the fronts and returns the previous ones.
func (p *proc) setFronts(fs []*front) []*front {
	p.frontMu.Lock()
	defer p.frontMu.Unlock()
	old := p.fronts
	p.fronts = fs
	return old
}

// New returns a supervisor for the engines under o.Dir/engines.
func New(o Options) (*Supervisor, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "engines"), 0o755); err != nil { //nolint:gosec // the engine users must traverse it
		return nil, fmt.Errorf("create engines dir: %w", err)
	}
	b, err := block(o.Net, o.Dir)
	if err != nil {
		return nil, err
	}
	if o.Net.IsValid() {
		if err := addLocalRoute(b); err != nil {
			return nil, err
		}
	}
	return &Supervisor{o: o, log: o.Logger, block: b, running: map[string]*proc{}}, nil
}

// Block is the /24 the engines' addresses are in.
func (s *Supervisor) Block() netip.Prefix { return s.block }

// Close stops every engine the supervisor started and waits for them.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	s.closed = true
	all := s.running
	s.running = map[string]*proc{}
	s.mu.Unlock()
	var errs []error
	for key, p := range all {
		if err := p.stop(p); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", key, err))
		}
	}
	if s.o.Net.IsValid() {
		errs = append(errs, delLocalRoute(s.block))
	}
	return errors.Join(errs...)
}

// Running reports whether the engine under key runs.
func (s *Supervisor) get(key string) (*proc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.running[key]
	if ok {
		select {
		case <-p.done:
			delete(s.running, key)
			return nil, false
		default:
		}
	}
	return p, ok
}

func (s *Supervisor) put(key string, p *proc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("engines: supervisor closed")
	}
	s.running[key] = p
	return nil
}

// stopKey stops the engine under key, if it runs.
func (s *Supervisor) stopKey(key string) error {
	s.mu.Lock()
	p, ok := s.running[key]
	delete(s.running, key)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return p.stop(p)
}

// dir is the directory of one engine, created if missing.
func (s *Supervisor) dir(kind, name string) string {
	return filepath.Join(s.o.Dir, "engines", kind, name)
}

// account is the OS user an engine runs as: nil when the cloud is not root (the engine then
// runs as the cloud's own user).
type account struct {
	uid, gid uint32
}

func engineUser(name string) (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up engine user %q (installed with its Debian package; run hack/install-engines.sh): %w", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &account{uid: uint32(uid), gid: uint32(gid)}, nil
}

// ownEntry gives one entry of a walked tree to the engine's user. An entry gone since its
// directory was read is skipped: a configuration file written beside the walk (a firewall rule's
// pg_hba.conf while the server starts) goes through a temporary file renamed into place.
func (a *account) ownEntry(p string, _ os.FileInfo, err error) error {
	if err == nil {
		err = os.Lchown(p, int(a.uid), int(a.gid)) //nolint:gosec // the tree is the cloud's own data dir
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// own gives path (recursively) to the engine's user and lets that user reach it: every ancestor
// directory gets the search (x) bit for others, never read. Test temp dirs are 0700.
func (a *account) own(path string) error {
	if a == nil {
		return nil
	}
	if err := filepath.Walk(path, a.ownEntry); err != nil {
		return fmt.Errorf("give %s to the engine user: %w", path, err)
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("make %s traversable: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// command builds an engine command: run as the engine's user, in its own process group, and
// killed by the kernel if the cloud dies (so kill -9 of the cloud leaves no engine behind).
func command(a *account, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if a != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid}
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "LC_ALL=C.UTF-8"}
	return cmd
}

// launch starts cmd and watches it; stderr (and stdout) keep their last lines for errors.
func launch(cmd *exec.Cmd) (*proc, error) {
	t := &tail{}
	cmd.Stdout, cmd.Stderr = t, t
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), stderr: t}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// terminate sends sig, waits up to grace, then kills.
func terminate(p *proc, sig syscall.Signal, grace time.Duration) error {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// exited describes why an engine that should run is gone, with its last output.
func (p *proc) exited(what string) error {
	return fmt.Errorf("%s exited (%w): %s", what, p.err, p.stderr.String())
}

// waitReady polls ready until it succeeds, the process exits, or ctx ends.
func waitReady(ctx context.Context, p *proc, what string, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	for {
		select {
		case <-p.done:
			return p.exited(what)
		default:
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.exited(what)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (%s)", what, last, p.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// port returns the port kept in file, or a free one (then kept there).
func port(file string) (int, error) {
	if b, err := os.ReadFile(file); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && free(n) {
			return n, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	n := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	if err := os.WriteFile(file, []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil { //nolint:gosec // a pid, not a secret
		return 0, err
	}
	return n, nil
}

func free(n int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(n))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// tail keeps the last 2 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 2048 {
		t.buf = t.buf[len(t.buf)-2048:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
