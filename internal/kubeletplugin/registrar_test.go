package kubeletplugin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/cerulean/cerulean/internal/kubeletplugin"
)

// dial connects to the registration socket as the kubelet's plugin watcher does.
func dial(t *testing.T, socket string) registerapi.RegistrationClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return registerapi.NewRegistrationClient(conn)
}

// The kubelet's side of the protocol, spoken by a test client; the real kubelet registers the
// Secrets Store CSI Driver through this package in internal/devenv's node test.
func TestRegistrationAnswersTheKubeletAndReportsItsVerdict(t *testing.T) {
	dir := t.TempDir()
	// A stale socket from a registrar that was killed is replaced.
	if err := os.WriteFile(filepath.Join(dir, "example.csi.k8s.io-reg.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := kubeletplugin.Register(kubeletplugin.Options{RegistryDir: dir, DriverName: "example.csi.k8s.io", Endpoint: "/run/x/csi.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Socket() != filepath.Join(dir, "example.csi.k8s.io-reg.sock") {
		t.Fatalf("socket %s: the kubelet's plugin watcher finds sockets in the registry by any name, node-driver-registrar's is NAME-reg.sock", r.Socket())
	}
	c := dial(t, r.Socket())
	ctx := t.Context()
	info, err := c.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != "example.csi.k8s.io" || info.Endpoint != "/run/x/csi.sock" || strings.Join(info.SupportedVersions, ",") != "1.0.0" {
		t.Fatalf("info %+v", info)
	}

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := r.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait before any verdict: %v", err)
	}
	if _, err := c.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "no CSI endpoint at /run/x/csi.sock"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx); !errors.Is(err, kubeletplugin.ErrRefused) || !strings.Contains(err.Error(), "no CSI endpoint at /run/x/csi.sock") {
		t.Fatalf("refused registration: %v", err)
	}
	// The kubelet tries again (it does after a restart): the latest verdict counts.
	if _, err := c.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("registered: %v", err)
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Socket()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Close (the kubelet would keep the driver registered): %v", err)
	}
}

func TestRegisterRefusesBadOptions(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	for name, o := range map[string]kubeletplugin.Options{
		"no name":         {RegistryDir: t.TempDir(), Endpoint: "/e"},
		"no endpoint":     {RegistryDir: t.TempDir(), DriverName: "d"},
		"no registry":     {DriverName: "d", Endpoint: "/e"},
		"socket too long": {RegistryDir: long, DriverName: "example.csi.k8s.io", Endpoint: "/e"},
	} {
		if r, err := kubeletplugin.Register(o); err == nil {
			_ = r.Close()
			t.Errorf("%s: registered", name)
		}
	}
}
