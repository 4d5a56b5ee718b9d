package csiprovider_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/csiprovider"
)

// wantStatus fails unless err is a gRPC status with this code whose message has every part.
func wantStatus(t *testing.T, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != code {
		t.Fatalf("got %v, want gRPC %s", err, code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("message %q lacks %q", st.Message(), p)
		}
	}
}

func TestVersion(t *testing.T) {
	e := newEnv(t, time.Minute)
	v, err := e.client.Version(t.Context(), &v1alpha1.VersionRequest{Version: "v1alpha1"})
	if err != nil || v.Version != "v1alpha1" || v.RuntimeName == "" {
		t.Fatalf("Version = %v, %v", v, err)
	}
}

// TestMountWorkloadIdentity: the pod's service-account token from the request is exchanged for
// the identity named by clientID, which reads the secrets through its role at the vault.
func TestMountWorkloadIdentity(t *testing.T) {
	e := newEnv(t, time.Minute)
	id := e.identity(t, "app")
	e.federate(t, "app", "default", "app")
	e.assign(t, e.vaultID, roleSecretsUser, *id.Properties.PrincipalID)
	v1 := e.setSecret(t, "db-password", "s3cret")
	e.setSecret(t, "api-key", "k3y")

	req := e.request(t, map[string]string{
		"clientID":               *id.Properties.ClientID,
		csiprovider.AttrSATokens: e.saTokens(t, "default", "app"),
		"objects":                objects("objectName: db-password\nobjectType: secret", "objectName: api-key\nobjectAlias: API_KEY"),
	}, "app-0", nil)
	versions, err := e.mount(t, req)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	if got, mode := readFile(t, req.TargetPath, "db-password"); got != "s3cret" || mode != 0o644 {
		t.Errorf("db-password = %q %o", got, mode)
	}
	if got, _ := readFile(t, req.TargetPath, "API_KEY"); got != "k3y" {
		t.Errorf("API_KEY = %q", got)
	}
	if versions["secret/db-password"] != v1 || versions["secret/api-key"] == "" {
		t.Errorf("object versions %v", versions)
	}

	// Another service account's token is refused by Entra ID: no files.
	other := e.request(t, map[string]string{
		"clientID":               *id.Properties.ClientID,
		csiprovider.AttrSATokens: e.saTokens(t, "default", "other"),
		"objects":                objects("objectName: db-password"),
	}, "other-0", nil)
	_, err = e.mount(t, other)
	wantStatus(t, err, codes.Unauthenticated, "AADSTS700213")
	empty(t, other.TargetPath)

	// clientID without the token the CSIDriver should have requested.
	noToken := e.request(t, map[string]string{"clientID": *id.Properties.ClientID, "objects": objects("objectName: db-password")}, "app-1", nil)
	_, err = e.mount(t, noToken)
	wantStatus(t, err, codes.InvalidArgument, "tokenRequests", csiprovider.TokenExchangeAudience)
}

// TestMountServicePrincipal: clientid / clientsecret from the node-publish secret.
func TestMountServicePrincipal(t *testing.T) {
	e := newEnv(t, time.Minute)
	p, _ := cloudtest.NewPrincipal(t, e.c, "csi-sp")
	secret, _, err := e.c.Entra().Directory.AddSecret(t.Context(), e.s.TenantID, p.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.assign(t, e.vaultID, roleSecretsUser, p.ObjectID)
	e.setSecret(t, "db-password", "s3cret")
	req := e.request(t, map[string]string{"objects": objects("objectName: db-password")}, "sp-0",
		map[string]string{"clientid": p.ClientID, "clientsecret": secret})
	if _, err := e.mount(t, req); err != nil {
		t.Fatalf("mount: %v", err)
	}
	if got, _ := readFile(t, req.TargetPath, "db-password"); got != "s3cret" {
		t.Errorf("db-password = %q", got)
	}
	// A wrong secret: Entra ID refuses, and the answer does not repeat it.
	bad := e.request(t, map[string]string{"objects": objects("objectName: db-password")}, "sp-1",
		map[string]string{"clientid": p.ClientID, "clientsecret": "not-the-secret-xyz"})
	_, err = e.mount(t, bad)
	wantStatus(t, err, codes.Unauthenticated, "servicePrincipal")
	if strings.Contains(err.Error(), "not-the-secret-xyz") || strings.Contains(err.Error(), secret) {
		t.Errorf("error repeats a client secret: %v", err)
	}
	empty(t, bad.TargetPath)
	// No identity at all.
	none := e.request(t, map[string]string{"objects": objects("objectName: db-password")}, "sp-2", nil)
	_, err = e.mount(t, none)
	wantStatus(t, err, codes.InvalidArgument, "nodePublishSecretRef")
}

// TestMountVMManagedIdentity: the node's user-assigned identity through the managed-identity
// endpoint, as code on the VM scale set gets it (IDENTITY_ENDPOINT and IDENTITY_HEADER).
func TestMountVMManagedIdentity(t *testing.T) {
	e := newEnv(t, time.Minute)
	id := e.identity(t, "node-kv")
	e.assign(t, e.vaultID, roleSecretsUser, *id.Properties.PrincipalID)
	vmss, err := armcompute.NewVirtualMachineScaleSetsClient(e.s.SubscriptionID, e.owner, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	poller, err := vmss.BeginCreateOrUpdate(t.Context(), e.rg, "nodes", armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(location),
		Identity: &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*id.ID: {}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := poller.PollUntilDone(t.Context(), &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vars, err := msi.ComputeEnv(e.s.DataDir, *res.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range vars {
		t.Setenv(kv[0], kv[1]) // what the provider's DaemonSet pod on that scale set sees
	}
	e.setSecret(t, "db-password", "s3cret")
	for _, sel := range []string{*id.Properties.ClientID, *id.ID} {
		req := e.request(t, map[string]string{"useVMManagedIdentity": "true", "userAssignedIdentityID": sel,
			"objects": objects("objectName: db-password")}, "vm-0", nil)
		if _, err := e.mount(t, req); err != nil {
			t.Fatalf("mount with userAssignedIdentityID %s: %v", sel, err)
		}
		if got, _ := readFile(t, req.TargetPath, "db-password"); got != "s3cret" {
			t.Errorf("db-password = %q", got)
		}
	}
	// An identity not assigned to the scale set.
	stranger := e.identity(t, "stranger")
	req := e.request(t, map[string]string{"useVMManagedIdentity": "true", "userAssignedIdentityID": *stranger.Properties.ClientID,
		"objects": objects("objectName: db-password")}, "vm-1", nil)
	_, err = e.mount(t, req)
	wantStatus(t, err, codes.Unauthenticated, "vmManagedIdentity")
	empty(t, req.TargetPath)
}

// spEnv is an env with a service principal allowed to read the vault, and its node-publish
// secret.
func spEnv(t *testing.T, ttl time.Duration) (*env, map[string]string, string) {
	e := newEnv(t, ttl)
	p, _ := cloudtest.NewPrincipal(t, e.c, "csi-reader")
	secret, _, err := e.c.Entra().Directory.AddSecret(t.Context(), e.s.TenantID, p.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.assign(t, e.vaultID, roleSecretsUser, p.ObjectID)
	return e, map[string]string{"clientid": p.ClientID, "clientsecret": secret}, p.ObjectID
}

// TestMountObjectOptions: objectAlias, objectEncoding, filePermission, objectVersion and
// objectVersionHistory as the upstream provider writes them.
func TestMountObjectOptions(t *testing.T) {
	e, sp, _ := spEnv(t, time.Minute)
	raw := []byte{0x00, 0xff, 0x10, 'a'}
	e.setSecret(t, "b64", base64.StdEncoding.EncodeToString(raw))
	e.setSecret(t, "hexed", hex.EncodeToString(raw))
	e.setSecret(t, "plain", "not base64!")
	old := e.setSecret(t, "rotating", "one")
	e.clock.Advance(time.Second) // versions are ordered by their creation time, in seconds
	e.setSecret(t, "rotating", "two")
	e.clock.Advance(time.Second)
	e.setSecret(t, "rotating", "three")

	req := e.request(t, map[string]string{"objects": objects(
		"objectName: b64\nobjectEncoding: base64\nobjectAlias: b64.bin",
		"objectName: hexed\nobjectEncoding: hex\nfilePermission: \"0600\"",
		"objectName: rotating\nobjectVersion: "+old+"\nobjectAlias: pinned",
		"objectName: rotating\nobjectVersionHistory: 2\nobjectAlias: history",
		"objectName: rotating\nobjectAlias: latest\nobjectEncoding: utf-8",
	)}, "opts-0", sp)
	versions, err := e.mount(t, req)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	if got, _ := readFile(t, req.TargetPath, "b64.bin"); got != string(raw) {
		t.Errorf("base64 object = %x", got)
	}
	if got, mode := readFile(t, req.TargetPath, "hexed"); got != string(raw) || mode != 0o600 {
		t.Errorf("hex object = %x mode %o", got, mode)
	}
	if got, _ := readFile(t, req.TargetPath, "pinned"); got != "one" {
		t.Errorf("pinned = %q", got)
	}
	if got, _ := readFile(t, req.TargetPath, "latest"); got != "three" {
		t.Errorf("latest = %q", got)
	}
	if a, _ := readFile(t, req.TargetPath, filepath.Join("history", "0")); a != "three" {
		t.Errorf("history/0 = %q", a)
	}
	if b, _ := readFile(t, req.TargetPath, filepath.Join("history", "1")); b != "two" {
		t.Errorf("history/1 = %q", b)
	}
	// The same object thrice: the first keeps upstream's id TYPE/NAME, the others add their file.
	if versions["secret/rotating"] != old || versions["secret/rotating/history/0"] != versions["secret/rotating/latest"] ||
		versions["secret/rotating/history/1"] == "" || versions["secret/rotating/history/0"] == versions["secret/rotating/history/1"] {
		t.Errorf("history versions %v", versions)
	}

	for _, tc := range []struct {
		name, objects string
		code          codes.Code
		parts         []string
	}{
		// Secrets User reads no key or certificate: Key Vault's 403, naming the object.
		{"key", objects("objectName: signing\nobjectType: key"), codes.PermissionDenied, []string{`key "signing"`, "403"}},
		{"cert", objects("objectName: tls\nobjectType: cert"), codes.PermissionDenied, []string{`cert "tls"`, "403"}},
		{"bad encoding value", objects("objectName: plain\nobjectEncoding: base64"), codes.FailedPrecondition, []string{`secret "plain"`, "not base64"}},
		{"bad objects", "array:\n  - |\n    objectType: secret\n", codes.InvalidArgument, []string{"objectName is not set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := e.request(t, map[string]string{"objects": objects("objectName: b64") + strings.TrimPrefix(tc.objects, "array:\n")}, "opts-1", sp)
			_, err := e.mount(t, req)
			wantStatus(t, err, tc.code, tc.parts...)
			empty(t, req.TargetPath)
		})
	}
}

// TestMountDenied: a secret the identity may not read is Key Vault's 403, passed on naming the
// object; a missing object is 404 naming it; either way no file, not even the readable ones.
func TestMountDenied(t *testing.T) {
	e, sp, _ := spEnv(t, time.Minute)
	e.setSecret(t, "readable", "fine")
	// A second vault the principal has no role on.
	otherURI, _ := e.createVault(t, "kv-other")
	_ = otherURI

	req := e.request(t, map[string]string{"keyvaultName": "kv-other", "objects": objects("objectName: anything")}, "deny-0", sp)
	_, err := e.mount(t, req)
	wantStatus(t, err, codes.PermissionDenied, `secret "anything"`, `vault "kv-other"`, "403", "may not read")
	empty(t, req.TargetPath)

	missing := e.request(t, map[string]string{"objects": objects("objectName: readable", "objectName: missing")}, "deny-1", sp)
	_, err = e.mount(t, missing)
	wantStatus(t, err, codes.NotFound, `secret "missing"`, "404", "SecretNotFound")
	empty(t, missing.TargetPath)

	noVault := e.request(t, map[string]string{"keyvaultName": "kv-nowhere", "objects": objects("objectName: readable")}, "deny-2", sp)
	_, err = e.mount(t, noVault)
	wantStatus(t, err, codes.NotFound, `"kv-nowhere"`)
	empty(t, noVault.TargetPath)

	for name, params := range map[string]map[string]string{
		"no vault":      {"keyvaultName": ""},
		"no tenant":     {"tenantId": ""},
		"bad bool":      {"usePodIdentity": "yes please"},
		"both modes":    {"usePodIdentity": "true", "useVMManagedIdentity": "true"},
		"unknown cloud": {"cloudName": "AzureMoonCloud"},
	} {
		t.Run(name, func(t *testing.T) {
			p := map[string]string{"objects": objects("objectName: readable")}
			for k, v := range params {
				p[k] = v
			}
			r := e.request(t, p, "bad-0", sp)
			_, err := e.mount(t, r)
			wantStatus(t, err, codes.InvalidArgument)
		})
	}
}

// TestMountRotation: the driver's rotation calls Mount again; a new version appears once the
// cache entry is older than the TTL (the staleness bound), and a pinned version is never
// fetched again.
func TestMountRotation(t *testing.T) {
	ttl := 2 * time.Minute
	e, sp, _ := spEnv(t, ttl)
	v1 := e.setSecret(t, "db-password", "one")
	params := map[string]string{"objects": objects("objectName: db-password", "objectName: db-password\nobjectAlias: pinned\nobjectVersion: "+v1)}
	req := e.request(t, params, "rot-0", sp)
	if _, err := e.mount(t, req); err != nil {
		t.Fatal(err)
	}
	v2 := e.setSecret(t, "db-password", "two")
	since := e.c.RequestLog().Last()
	// Within the TTL: still the cached version.
	versions, err := e.mount(t, req)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readFile(t, req.TargetPath, "db-password"); got != "one" || versions["secret/db-password"] != v1 {
		t.Errorf("within the TTL: %q %v", got, versions)
	}
	e.clock.Advance(ttl + time.Second)
	versions, err = e.mount(t, req)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readFile(t, req.TargetPath, "db-password"); got != "two" || versions["secret/db-password"] != v2 {
		t.Errorf("after the TTL: %q %v, want two %s", got, versions, v2)
	}
	if got, _ := readFile(t, req.TargetPath, "pinned"); got != "one" || versions["secret/db-password/pinned"] != v1 {
		t.Errorf("pinned = %q %v", got, versions)
	}
	gets := e.c.Requests(reqlog.Filter{Service: "keyvault", Method: http.MethodGet, Status: http.StatusOK, Since: since})
	if len(gets) != 1 || !strings.Contains(gets[0].Path, "/secrets/db-password") || strings.Contains(gets[0].Path, v1) {
		t.Errorf("Key Vault GETs after the first mount: %+v, want one of the latest version", gets)
	}
}

// TestMountRetries429: Key Vault's throttling answers are retried after their Retry-After and
// the mount succeeds.
func TestMountRetries429(t *testing.T) {
	e, sp, _ := spEnv(t, time.Minute)
	e.setSecret(t, "db-password", "s3cret")
	if err := e.c.Faults().Set(faults.Config{Rules: []faults.Rule{{Name: "throttle", ResourceType: faults.ServiceKeyVault, Method: http.MethodGet,
		Status: http.StatusTooManyRequests, RetryAfter: faults.Duration(50 * time.Millisecond), Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	since := e.c.RequestLog().Last()
	req := e.request(t, map[string]string{"objects": objects("objectName: db-password")}, "thr-0", sp)
	if _, err := e.mount(t, req); err != nil {
		t.Fatalf("mount through two 429s: %v", err)
	}
	if got, _ := readFile(t, req.TargetPath, "db-password"); got != "s3cret" {
		t.Errorf("db-password = %q", got)
	}
	if n := len(e.c.Requests(reqlog.Filter{Service: "keyvault", Status: http.StatusTooManyRequests, Since: since})); n != 2 {
		t.Errorf("%d throttled requests, want 2", n)
	}
}

// TestMountThousandPods: 1,000 pods of one class mounting at once cost one Key Vault GET per
// object; with the cache off, one per pod and object.
func TestMountThousandPods(t *testing.T) {
	e, sp, reader := spEnv(t, time.Minute)
	e.setSecret(t, "db-password", "s3cret")
	e.setSecret(t, "api-key", "k3y")
	params := map[string]string{"objects": objects("objectName: db-password", "objectName: api-key")}
	const pods = 1000
	since := e.c.RequestLog().Last()
	var wg sync.WaitGroup
	errs := make(chan error, pods)
	for i := range pods {
		req := e.request(t, params, "pod-"+strings.Repeat("x", i%3)+string(rune('a'+i%26)), sp)
		wg.Go(func() {
			resp, err := e.client.Mount(t.Context(), req)
			if err == nil && len(resp.Files) != 2 {
				err = status.Error(codes.Internal, "files missing")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("mount: %v", err)
		}
	}
	gets := e.c.Requests(reqlog.Filter{Service: "keyvault", Method: http.MethodGet, Status: http.StatusOK, Principal: reader, Since: since})
	if len(gets) != 2 {
		t.Errorf("%d Key Vault GETs for %d pods x 2 objects, want 2", len(gets), pods)
	}
	tokens := e.c.Requests(reqlog.Filter{Service: "entra", Method: http.MethodPost, Since: since})
	if len(tokens) != 1 {
		t.Errorf("%d token requests, want 1 (one proof per credential)", len(tokens))
	}
}
