package kmsplugin_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/kmsplugin"
)

// A real kube-apiserver with the plugin in its EncryptionConfiguration: a Secret is ciphertext
// in etcd and plain through the API; after the key is rotated (and the API server restarted, so
// nothing is cached) new Secrets are wrapped with the new version and old ones still read.
func TestKubeAPIServerEncryptsSecretsWithTheKey(t *testing.T) {
	vk := newVaultKey(t)
	first := vk.newVersion(t)
	app, cred := cloudtest.NewPrincipal(t, vk.c, "kms-apiserver")
	cloudtest.AssignRole(t, vk.c, vk.keyID, authz.KeyVaultCryptoServiceEncryptionUser, app.ObjectID)
	dir, _, config := encryptionSetup(t, vk, cred)
	start := func() (*devenv.ControlPlane, kubernetes.Interface) {
		t.Helper()
		cp, err := devenv.Start(t.Context(), devenv.Options{DataDir: filepath.Join(dir, "cluster"), EncryptionConfig: config})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cp.RESTConfig)
		if err != nil {
			t.Fatal(err)
		}
		return cp, cs
	}
	cp, cs := start()
	t.Cleanup(func() { cp.Stop() })

	write := func(name, value string) {
		t.Helper()
		if _, err := cs.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			StringData: map[string]string{"password": value}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(name, value, kid string) {
		t.Helper()
		raw := devenvtest.EtcdValue(t, cp.EtcdURL, "/registry/secrets/default/"+name)
		if !bytes.HasPrefix(raw, []byte("k8s:enc:kms:v2:keyvault:")) || bytes.Contains(raw, []byte(value)) {
			t.Fatalf("secret %s in etcd is not KMS ciphertext: %.60q", name, raw)
		}
		if !bytes.Contains(raw, []byte(kid)) {
			t.Errorf("secret %s in etcd is not wrapped with key version %s", name, kid)
		}
	}
	read := func(name, value string) {
		t.Helper()
		s, err := cs.CoreV1().Secrets("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || string(s.Data["password"]) != value {
			t.Fatalf("secret %s through the API: %v", name, err)
		}
	}
	write("before", "plain-before-rotation")
	stored("before", "plain-before-rotation", first)
	read("before", "plain-before-rotation")

	second := vk.newVersion(t)
	cp.Stop()
	cp, cs = start()
	write("after", "plain-after-rotation")
	stored("after", "plain-after-rotation", second)
	read("after", "plain-after-rotation")
	read("before", "plain-before-rotation")
}

// The plugin's identity without a crypto role on the key: kube-apiserver never becomes ready,
// and its readiness check names the KMS provider (there is no data key to write with).
func TestKubeAPIServerWithoutTheRoleIsNeverReady(t *testing.T) {
	vk := newVaultKey(t)
	_, cred := cloudtest.NewPrincipal(t, vk.c, "kms-apiserver-no-role")
	dir, _, config := encryptionSetup(t, vk, cred)
	_, err := devenv.Start(t.Context(), devenv.Options{DataDir: filepath.Join(dir, "cluster"), EncryptionConfig: config, ReadyTimeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "kms-provider") {
		t.Fatalf("kube-apiserver with a KMS plugin that cannot wrap: %v; want it never ready, its readiness naming the KMS provider", err)
	}
}

// encryptionSetup serves the plugin with cred on a socket and writes an EncryptionConfiguration
// that encrypts Secrets with it, in a fresh short directory.
func encryptionSetup(t testing.TB, vk vaultKey, cred azcore.TokenCredential) (dir, socket, config string) {
	t.Helper()
	p, err := kmsplugin.New(kmsplugin.Options{VaultURL: vk.vault, KeyName: "etcd", Credential: cred, Client: clientOptions(vk.c)})
	if err != nil {
		t.Fatal(err)
	}
	dir, err = os.MkdirTemp("", "kms-") // short: a unix socket's path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket = filepath.Join(dir, "kms.sock")
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- kmsplugin.Serve(ctx, p, socket) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	config = filepath.Join(dir, "encryption.yaml")
	if err := os.WriteFile(config, kmsplugin.EncryptionConfig(socket), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, socket, config
}
