package csiprovider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"
)

// DefaultSocket is where the driver looks for the azure provider.
const DefaultSocket = "/var/run/secrets-store-csi-providers/azure.sock"

// Server is the provider listening on its unix socket.
type Server struct {
	path string
	grpc *grpc.Server
	ln   net.Listener
	done chan error
}

// maxSocketPath is the longest path Linux accepts for a unix socket (sun_path less its NUL).
const maxSocketPath = 107

// Listen serves p on a unix socket at path (its directory is created 0755, a stale socket
// replaced, the socket made 0600 for the driver, which runs as root). Close stops it.
func Listen(p *Provider, path string) (*Server, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes, more than a unix socket allows (%d): choose a shorter directory", path, len(path), maxSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // the providers directory is the driver's, shared with other providers
		return nil, fmt.Errorf("create providers directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("restrict socket: %w", err)
	}
	s := &Server{path: path, grpc: grpc.NewServer(grpc.UnaryInterceptor(timeGRPC)), ln: ln, done: make(chan error, 1)}
	v1alpha1.RegisterCSIDriverProviderServer(s.grpc, p)
	go func() { s.done <- s.grpc.Serve(ln) }()
	return s, nil
}

// Close stops serving, letting calls in flight finish for up to 10 seconds, and removes the
// socket.
func (s *Server) Close() error {
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		s.grpc.Stop()
	}
	err := <-s.done
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// Run serves until ctx ends.
func Run(ctx context.Context, o Options, socket string) error {
	p, err := New(o)
	if err != nil {
		return err
	}
	s, err := Listen(p, socket)
	if err != nil {
		return err
	}
	var metrics *http.Server
	if o.MetricsAddr != "" && o.MetricsAddr != "0" {
		ml, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			_ = s.Close()
			return fmt.Errorf("listen for metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", MetricsHandler())
		metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = metrics.Serve(ml) }()
	}
	o.Logger.Info("Serving the Key Vault provider", "socket", socket, "cacheTTL", o.CacheTTL, "metrics", o.MetricsAddr)
	<-ctx.Done()
	if metrics != nil {
		_ = metrics.Close()
	}
	return s.Close()
}
