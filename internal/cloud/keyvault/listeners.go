package keyvault

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Vaults listen on the loopback interface only.
const loopback = "127.0.0.1"

// vaultServer is one vault's HTTPS origin.
type vaultServer struct {
	srv      *http.Server
	inflight httpx.InFlight
	served   chan error
}

func (vs *vaultServer) shutdown(ctx context.Context) error {
	err := httpx.Shutdown(ctx, vs.srv, &vs.inflight)
	if serr := <-vs.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Reservation is a port bound for a vault being created, before its record is committed: the
// port is known to be free, and goes back to the system if the creation fails.
type Reservation struct {
	Port int
	ln   net.Listener
}

// Release closes a reservation that was not activated.
func (r *Reservation) Release() {
	if r != nil && r.ln != nil {
		_ = r.ln.Close()
	}
}

// Reserve binds a free loopback port for a new vault.
func (s *Service) Reserve() (*Reservation, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return nil, fmt.Errorf("reserve vault port: %w", err)
	}
	return &Reservation{Port: ln.Addr().(*net.TCPAddr).Port, ln: ln}, nil
}

// Activate starts serving the named vault on its reservation, once its record is committed.
func (s *Service) Activate(name string, r *Reservation) {
	ln := r.ln
	r.ln = nil
	s.serveOn(name, ln)
}

// Resume serves an existing vault on its recorded port (at start, and when a deleted vault is
// recovered). A port another process took meanwhile is retried briefly, then reported.
func (s *Service) Resume(ctx context.Context, name string, port int) error {
	s.mu.Lock()
	_, running := s.servers[vaultKey(name)]
	s.mu.Unlock()
	if running {
		return nil
	}
	addr := net.JoinHostPort(loopback, strconv.Itoa(port))
	var ln net.Listener
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("listen for vault %s on %s: %w", name, addr, err)
	}
	s.serveOn(name, ln)
	return nil
}

func (s *Service) serveOn(name string, ln net.Listener) {
	vs := &vaultServer{served: make(chan error, 1)}
	srv := &http.Server{
		Handler:           vs.inflight.Wrap(s.handler(name)),
		TLSConfig:         s.o.TLS.Clone(),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	vs.srv = srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.servers[vaultKey(name)]; dup || s.closed {
		_ = ln.Close()
		return
	}
	s.servers[vaultKey(name)] = vs
	go func() { vs.served <- srv.Serve(tls.NewListener(ln, srv.TLSConfig)) }()
}

// Stop stops serving the named vault (deleted or purged).
func (s *Service) Stop(name string) {
	s.mu.Lock()
	vs, ok := s.servers[vaultKey(name)]
	delete(s.servers, vaultKey(name))
	s.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := vs.shutdown(ctx); err != nil {
		s.log.Warn("Stopping vault listener failed", "vault", name, "err", err)
	}
}

// stopIfGone stops a vault's listener unless the vault is active again by now (recovered or
// re-created on the same name between the request that noticed and this call).
func (s *Service) stopIfGone(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := s.Vault(ctx, name)
	if err == nil && !v.IsDeleted() || err != nil && !errors.Is(err, ErrVaultNotFound) {
		return
	}
	s.Stop(name)
}

// sweepEvery is how often listeners of vaults deleted behind the data plane's back (with their
// resource group, in ARM's transaction) are closed.
const sweepEvery = 5 * time.Second

// sweep closes the listeners of vaults that are no longer active.
func (s *Service) sweep(ctx context.Context) {
	s.mu.Lock()
	names := make([]string, 0, len(s.servers))
	for k := range s.servers {
		names = append(names, k)
	}
	s.mu.Unlock()
	for _, name := range names {
		s.stopIfGone(ctx, name)
	}
}

func (s *Service) sweeper(ctx context.Context) {
	defer close(s.swept)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sweep(ctx)
		}
	}
}

// Start serves every active vault on its recorded port.
func (s *Service) Start(ctx context.Context) error {
	// The sweeper outlives Start's context (a start-up deadline); Close ends it.
	sweepCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopSweep = cancel
	s.swept = make(chan struct{})
	go s.sweeper(sweepCtx)
	var vaults []Vault
	err := s.o.Store.View(ctx, func(tx *store.Tx) error {
		var err error
		vaults, err = VaultsTx(tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("load vaults: %w", err)
	}
	var errs []error
	for _, v := range vaults {
		if v.IsDeleted() {
			continue
		}
		if err := s.Resume(ctx, v.Name, v.Port); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Serving reports whether the named vault has a listener (for tests and the management plane).
func (s *Service) Serving(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.servers[vaultKey(name)]
	return ok
}
