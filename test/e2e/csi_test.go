package e2e

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	cerup "github.com/cerulean/cerulean/internal/up"
)

// checkCSIProvider: `up` serves the Key Vault provider on DIR/csi-providers/azure.sock,
// named in DIR/env, and it reaches the local cloud (a vault that does not exist is NotFound by
// name, through the cloud's vault lookup).
func checkCSIProvider(t *testing.T, dir string, env map[string]string) {
	t.Helper()
	socket := env["CERULEAN_CSI_PROVIDER_SOCKET"]
	if socket != filepath.Join(dir, cerup.CSIProvidersDir, "azure.sock") {
		t.Fatalf("CERULEAN_CSI_PROVIDER_SOCKET=%q", socket)
	}
	client := providerClient(t, env)
	if v, err := client.Version(t.Context(), &v1alpha1.VersionRequest{Version: "v1alpha1"}); err != nil || v.Version != "v1alpha1" {
		t.Fatalf("provider Version: %v %v", v, err)
	}
	attrib, _ := json.Marshal(map[string]string{"keyvaultName": "kv-absent", "tenantId": env["AZURE_TENANT_ID"],
		"objects": "array:\n  - |\n    objectName: x\n"})
	secrets, _ := json.Marshal(map[string]string{"clientid": env["AZURE_CLIENT_ID"], "clientsecret": env["AZURE_CLIENT_SECRET"]})
	_, err := client.Mount(t.Context(), &v1alpha1.MountRequest{Attributes: string(attrib), Secrets: string(secrets), TargetPath: t.TempDir(), Permission: "420"})
	if st, _ := status.FromError(err); st.Code() != codes.NotFound || !strings.Contains(st.Message(), "kv-absent") {
		t.Fatalf("mount from a vault that does not exist: %v, want NotFound naming it", err)
	}
}

// providerClient dials up's provider on DIR/env's CERULEAN_CSI_PROVIDER_SOCKET, as the driver
// does; the connection closes when the test ends.
func providerClient(t *testing.T, env map[string]string) v1alpha1.CSIDriverProviderClient {
	t.Helper()
	socket := env["CERULEAN_CSI_PROVIDER_SOCKET"]
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return v1alpha1.NewCSIDriverProviderClient(conn)
}
