// Package csiprovidertest serves a provider to tests as the Secrets Store CSI Driver reaches it:
// on a unix socket, over gRPC without transport security. Only tests import it; it fails the
// test on any error.
package csiprovidertest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	"github.com/cerulean/cerulean/internal/csiprovider"
)

// Serve serves p on azure.sock in a fresh directory under the system's temporary directory
// (short: a unix socket's path is limited) and returns a client dialled as the driver dials;
// both close, and the directory goes, when the test ends.
func Serve(t testing.TB, p *csiprovider.Provider) v1alpha1.CSIDriverProviderClient {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "azure.sock")
	srv, err := csiprovider.Listen(p, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return v1alpha1.NewCSIDriverProviderClient(conn)
}
