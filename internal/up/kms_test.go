package up_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/up"
)

// With KMS (--kms) kube-apiserver encrypts Secrets with the local Key Vault's key through
// cerulean's plugin: a Secret is ciphertext in etcd and plain through the API.
func TestUpEncryptsSecretsWithKeyVault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cs, out := startUp(t, up.Options{DataDir: dir, CloudAddr: "127.0.0.1:0", Clusters: 1, NoManager: true, KMS: true})
	const value = "plain-only-through-the-api"
	if _, err := cs.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		StringData: map[string]string{"password": value}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ports.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ports struct {
		EtcdClient int `json:"etcdClient"`
	}
	if err := json.Unmarshal(b, &ports); err != nil {
		t.Fatal(err)
	}
	raw := devenvtest.EtcdValue(t, "http://127.0.0.1:"+strconv.Itoa(ports.EtcdClient), "/registry/secrets/default/db")
	if !bytes.HasPrefix(raw, []byte("k8s:enc:kms:v2:keyvault:")) || bytes.Contains(raw, []byte(value)) {
		t.Fatalf("the Secret in etcd is not KMS ciphertext: %.60q\n%s", raw, out)
	}
	s, err := cs.CoreV1().Secrets("default").Get(t.Context(), "db", metav1.GetOptions{})
	if err != nil || string(s.Data["password"]) != value {
		t.Fatalf("the Secret through the API: %v", err)
	}
}
