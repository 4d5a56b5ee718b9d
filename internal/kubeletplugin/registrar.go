// Package kubeletplugin registers a CSI driver with the kubelet, as the node-driver-registrar
// sidecar does: it serves the kubelet's plugin-registration gRPC API
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1) on a socket in the kubelet's plugins_registry
// directory. The kubelet finds the socket, asks GetInfo for the driver's name and CSI endpoint,
// connects to the driver, records it in the node's CSINode, and reports the outcome through
// NotifyRegistrationStatus. Removing the socket unregisters the driver.
package kubeletplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// ErrRefused reports that the kubelet refused the registration.
var ErrRefused = errors.New("the kubelet refused the plugin")

// maxSocketPath is the longest path Linux accepts for a unix socket (sun_path less its NUL).
const maxSocketPath = 107

// Options describe the driver to register.
type Options struct {
	// RegistryDir is the kubelet's plugin registry: ROOT/plugins_registry.
	RegistryDir string
	// DriverName is the CSI driver's name, e.g. secrets-store.csi.k8s.io.
	DriverName string
	// Endpoint is the driver's CSI socket path as the kubelet sees it.
	Endpoint string
	// Versions are the CSI versions announced (default 1.0.0).
	Versions []string
	// Logger receives the kubelet's calls; nil discards them.
	Logger *slog.Logger
}

// Registration serves the registration socket until Close.
type Registration struct {
	o      Options
	socket string
	srv    *grpc.Server
	served chan error

	mu       sync.Mutex
	notified chan struct{} // closed at the kubelet's first NotifyRegistrationStatus
	status   error         // the kubelet's verdict, valid once notified is closed
}

// Register serves the registration socket for o's driver: ROOT/plugins_registry/NAME-reg.sock,
// the node-driver-registrar's name. A stale socket is replaced.
func Register(o Options) (*Registration, error) {
	if o.RegistryDir == "" || o.DriverName == "" || o.Endpoint == "" {
		return nil, errors.New("register plugin: the registry directory, driver name and endpoint are required")
	}
	if len(o.Versions) == 0 {
		o.Versions = []string{"1.0.0"}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	socket := filepath.Join(o.RegistryDir, o.DriverName+"-reg.sock")
	if len(socket) > maxSocketPath {
		return nil, fmt.Errorf("register plugin: socket path %s is longer than a unix socket allows (%d bytes)", socket, maxSocketPath)
	}
	if err := os.MkdirAll(o.RegistryDir, 0o750); err != nil {
		return nil, fmt.Errorf("register plugin: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("register plugin: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("register plugin: %w", err)
	}
	r := &Registration{o: o, socket: socket, srv: grpc.NewServer(), served: make(chan error, 1), notified: make(chan struct{})}
	registerapi.RegisterRegistrationServer(r.srv, &server{r: r})
	go func() { r.served <- r.srv.Serve(ln) }()
	return r, nil
}

// Socket is the registration socket's path.
func (r *Registration) Socket() string { return r.socket }

// Wait returns once the kubelet has reported on the registration: nil when it registered the
// driver, an error wrapping ErrRefused with the kubelet's reason otherwise.
func (r *Registration) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("wait for the kubelet to register %s: %w", r.o.DriverName, ctx.Err())
	case <-r.notified:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.status
	}
}

// Close stops serving and removes the socket: the kubelet then unregisters the driver.
func (r *Registration) Close() error {
	r.srv.Stop()
	err := <-r.served
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	if rerr := os.Remove(r.socket); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("stop plugin registration: %w", err)
	}
	return nil
}

// server implements registerapi.RegistrationServer.
type server struct {
	registerapi.UnimplementedRegistrationServer
	r *Registration
}

func (s *server) GetInfo(ctx context.Context, _ *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	o := s.r.o
	o.Logger.InfoContext(ctx, "The kubelet asked for the plugin's information", "driver", o.DriverName, "endpoint", o.Endpoint)
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: o.DriverName, Endpoint: o.Endpoint, SupportedVersions: o.Versions}, nil
}

func (s *server) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r := s.r
	var status error
	if !st.PluginRegistered {
		status = fmt.Errorf("%w %s: %s", ErrRefused, r.o.DriverName, st.Error)
		r.o.Logger.ErrorContext(ctx, "The kubelet refused the plugin", "driver", r.o.DriverName, "err", st.Error)
	} else {
		r.o.Logger.InfoContext(ctx, "The kubelet registered the plugin", "driver", r.o.DriverName)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.notified:
		// A later verdict (the kubelet registers again after a restart) replaces the first.
		r.status = status
	default:
		r.status = status
		close(r.notified)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
