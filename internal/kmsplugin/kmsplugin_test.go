package kmsplugin_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	kmsapi "k8s.io/kms/apis/v2"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/kmsplugin"
)

// vaultKey is a local cloud with an RBAC vault holding an RSA key, and the owner's key client.
type vaultKey struct {
	c     *cloud.Cloud
	vault string // URI
	keyID string // resource id of the vault, the roles' scope
	keys  *azkeys.Client
}

func newVaultKey(t testing.TB) vaultKey {
	t.Helper()
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	owner, opts := cloudtest.OwnerCred(t, c), cloudtest.ARMOptions(c)
	cloudtest.CreateGroup(t, c, owner, opts, "local", "kms-rg")
	v := cloudtest.CreateRBACVault(t, c, owner, opts, "local", "kms-rg", "kmsvault")
	cloudtest.AssignRole(t, c, *v.ID, authz.KeyVaultCryptoOfficer, c.Settings().ObjectID)
	keys, err := azkeys.NewClient(*v.Properties.VaultURI, owner, clientOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	vk := vaultKey{c: c, vault: *v.Properties.VaultURI, keyID: *v.ID, keys: keys}
	vk.newVersion(t)
	return vk
}

// newVersion makes a new version of the RSA key "etcd" (the first one on first use): a rotation.
func (vk vaultKey) newVersion(t testing.TB) string {
	t.Helper()
	k, err := vk.keys.CreateKey(t.Context(), "etcd", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA), KeySize: to.Ptr[int32](2048)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(*k.Key.KID)
}

func clientOptions(c *cloud.Cloud) *azkeys.ClientOptions {
	return &azkeys.ClientOptions{ClientOptions: cloudtest.NoRetry(c), DisableChallengeResourceVerification: true}
}

// serve runs the plugin with cred on a socket and returns a client speaking the KMS v2 API, as
// kube-apiserver does.
func serve(t *testing.T, vk vaultKey, cred azcore.TokenCredential) kmsapi.KeyManagementServiceClient {
	t.Helper()
	p, err := kmsplugin.New(kmsplugin.Options{VaultURL: vk.vault, KeyName: "etcd", Credential: cred, Client: clientOptions(vk.c)})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(t.TempDir(), "kms.sock")
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- kmsplugin.Serve(ctx, p, socket) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return kmsapi.NewKeyManagementServiceClient(conn)
}

func status(t *testing.T, kms kmsapi.KeyManagementServiceClient) *kmsapi.StatusResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := kms.Status(ctx, &kmsapi.StatusRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The plugin wraps the API server's data keys with the Key Vault key and unwraps them; after a
// rotation new data keys get the new version and the old ones still unwrap.
func TestWrapUnwrapAcrossRotation(t *testing.T) {
	vk := newVaultKey(t)
	first := strings.TrimSuffix(vk.newVersion(t), "/") // the version the plugin starts with
	app, cred := cloudtest.NewPrincipal(t, vk.c, "kms-plugin")
	cloudtest.AssignRole(t, vk.c, vk.keyID, authz.KeyVaultCryptoServiceEncryptionUser, app.ObjectID)
	kms := serve(t, vk, cred)

	st := status(t, kms)
	if st.Healthz != "ok" || st.Version != "v2" || st.KeyId != first {
		t.Fatalf("status = %+v, want healthy v2 with key id %s", st, first)
	}
	dek := make([]byte, 32)
	_, _ = rand.Read(dek)
	enc, err := kms.Encrypt(t.Context(), &kmsapi.EncryptRequest{Plaintext: dek, Uid: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if enc.KeyId != first || bytes.Contains(enc.Ciphertext, dek) || len(enc.Ciphertext) != 256 {
		t.Fatalf("encrypt: key id %s (want %s), %d bytes of ciphertext", enc.KeyId, first, len(enc.Ciphertext))
	}
	dec, err := kms.Decrypt(t.Context(), &kmsapi.DecryptRequest{Ciphertext: enc.Ciphertext, KeyId: enc.KeyId, Uid: "2"})
	if err != nil || !bytes.Equal(dec.Plaintext, dek) {
		t.Fatalf("decrypt: %v, round trip equal %v", err, bytes.Equal(dec.GetPlaintext(), dek))
	}

	second := strings.TrimSuffix(vk.newVersion(t), "/")
	if st := status(t, kms); st.KeyId != second {
		t.Fatalf("after the rotation status names %s, want %s", st.KeyId, second)
	}
	enc2, err := kms.Encrypt(t.Context(), &kmsapi.EncryptRequest{Plaintext: dek, Uid: "3"})
	if err != nil || enc2.KeyId != second {
		t.Fatalf("encrypt after the rotation: %v, key id %s want %s", err, enc2.GetKeyId(), second)
	}
	if dec, err := kms.Decrypt(t.Context(), &kmsapi.DecryptRequest{Ciphertext: enc.Ciphertext, KeyId: enc.KeyId, Uid: "4"}); err != nil || !bytes.Equal(dec.Plaintext, dek) {
		t.Fatalf("a data key wrapped before the rotation: %v", err)
	}

	// Bad input: a ciphertext under another key's id, a corrupted ciphertext.
	other := strings.Replace(enc.KeyId, "/keys/etcd/", "/keys/other/", 1)
	if _, err := kms.Decrypt(t.Context(), &kmsapi.DecryptRequest{Ciphertext: enc.Ciphertext, KeyId: other, Uid: "5"}); err == nil || !strings.Contains(err.Error(), "not a version of Key Vault key etcd") {
		t.Errorf("decrypt under another key's id: %v", err)
	}
	bad := bytes.Clone(enc.Ciphertext)
	bad[0] ^= 0xff
	if _, err := kms.Decrypt(t.Context(), &kmsapi.DecryptRequest{Ciphertext: bad, KeyId: enc.KeyId, Uid: "6"}); err == nil {
		t.Errorf("a corrupted ciphertext unwrapped")
	}
}

// An identity without a crypto role on the key: the plugin says it is unhealthy and every wrap
// fails, naming the refusal; nothing is ever handed back in the clear.
func TestWithoutTheRoleNothingWraps(t *testing.T) {
	vk := newVaultKey(t)
	_, cred := cloudtest.NewPrincipal(t, vk.c, "kms-plugin-no-role")
	kms := serve(t, vk, cred)
	if st := status(t, kms); st.Healthz == "ok" || !strings.Contains(st.Healthz, "Forbidden") {
		t.Errorf("status without the role = %+v, want unhealthy naming the refusal", st)
	}
	enc, err := kms.Encrypt(t.Context(), &kmsapi.EncryptRequest{Plaintext: []byte("0123456789abcdef0123456789abcdef"), Uid: "1"})
	if err == nil || !strings.Contains(err.Error(), "wrap with Key Vault key etcd") {
		t.Fatalf("encrypt without the role: %v %+v", err, enc)
	}
}

// Bad options are refused before anything is called.
func TestOptionsChecked(t *testing.T) {
	cred := azcore.TokenCredential(nil)
	for name, o := range map[string]kmsplugin.Options{
		"no vault":      {KeyName: "k", Credential: cred},
		"http vault":    {VaultURL: "http://v.vault.azure.net/", KeyName: "k"},
		"no key name":   {VaultURL: "https://v.vault.azure.net/"},
		"no credential": {VaultURL: "https://v.vault.azure.net/", KeyName: "k"},
	} {
		if _, err := kmsplugin.New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
