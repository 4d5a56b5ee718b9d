package kmsplugin_test

import (
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/devenv"
)

// BenchmarkSecretWrite is what the plugin adds to a Secret write: kube-apiserver without
// encryption (the baseline), then with the plugin over the local cloud's Key Vault. KMS v2
// wraps a data key once and reuses it, so a write costs AES-GCM, not a Key Vault call.
func BenchmarkSecretWrite(b *testing.B) {
	vk := newVaultKey(b)
	app, cred := cloudtest.NewPrincipal(b, vk.c, "kms-bench")
	cloudtest.AssignRole(b, vk.c, vk.keyID, authz.KeyVaultCryptoServiceEncryptionUser, app.ObjectID)
	dir, _, config := encryptionSetup(b, vk, cred)
	for _, mode := range []struct{ name, config string }{{"without-kms", ""}, {"with-kms", config}} {
		b.Run(mode.name, func(b *testing.B) {
			cp, err := devenv.Start(b.Context(), devenv.Options{DataDir: filepath.Join(dir, mode.name), EncryptionConfig: mode.config})
			if err != nil {
				b.Fatal(err)
			}
			defer cp.Stop()
			cs, err := kubernetes.NewForConfig(cp.RESTConfig)
			if err != nil {
				b.Fatal(err)
			}
			value := map[string][]byte{"password": []byte("benchmark-value")}
			i := 0
			for b.Loop() {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)}, Data: value}
				if _, err := cs.CoreV1().Secrets("default").Create(b.Context(), s, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
