// Package podidentitytest is test support for pod identity: it installs the
// aadpodidentity.k8s.io CRDs into a control plane and runs the assignment controller in a
// manager. Only tests and benchmarks import it; its test helpers fail the test on any error,
// the ...E forms (for benchmarks) return it.
package podidentitytest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/controller/podidentity"
)

// Scheme knows the core kinds and aadpodidentity.k8s.io/v1.
func Scheme(t testing.TB) *k8sruntime.Scheme {
	t.Helper()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// NewScheme is the scheme of Scheme.
func NewScheme() (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, aadv1.AddToScheme, ceruleanv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// CRDDir is config/crd/bases of this module.
func CRDDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "config", "crd", "bases")
}

// InstallCRDs creates the aadpodidentity.k8s.io CRDs (if absent) and waits until they are
// established.
func InstallCRDs(t testing.TB, cfg *rest.Config) {
	t.Helper()
	if err := InstallCRDsE(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
}

// InstallCRDsE is InstallCRDs returning its error.
func InstallCRDsE(ctx context.Context, cfg *rest.Config) error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(CRDDir(), "aadpodidentity.k8s.io_*.yaml"))
	if len(files) != 4 {
		return fmt.Errorf("want 4 CRD files in %s, found %d", CRDDir(), len(files))
	}
	// The controller and the webhook read NamespaceGrants.
	files = append(files, filepath.Join(CRDDir(), "cerulean.dev_namespacegrants.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			return fmt.Errorf("decode %s: %w", f, err)
		}
		if err := c.Create(ctx, &crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("wait for CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

// GrantAll gives namespaces every identity and scope (a NamespaceGrant named after the first,
// deleted when the test ends): tests that are not about grants run in granted namespaces, as
// a cluster admin's tenants would.
func GrantAll(t testing.TB, c client.Client, namespaces ...string) {
	t.Helper()
	g := &ceruleanv1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: "test-" + namespaces[0]},
		Spec: ceruleanv1.NamespaceGrantSpec{Namespaces: namespaces, Identities: []string{"*"}, Scopes: []string{"/subscriptions/*"}}}
	if err := c.Create(t.Context(), g); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("grant namespaces %v: %v", namespaces, err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), g) })
}

// StartController runs the assignment controller in a manager of its own until the test ends.
func StartController(t testing.TB, cfg *rest.Config, opts podidentity.Options) {
	t.Helper()
	stop, err := StartControllerE(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// StartControllerWithMetrics is StartController with the manager's metrics endpoint on a free
// loopback port; it returns the endpoint's URL.
func StartControllerWithMetrics(t testing.TB, cfg *rest.Config, opts podidentity.Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	stop, err := startController(cfg, opts, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return "http://" + addr
}

// StartControllerE starts the controller in a manager of its own; stop ends it.
func StartControllerE(cfg *rest.Config, opts podidentity.Options) (stop func() error, err error) {
	return startController(cfg, opts, "0")
}

// startController starts the controller in a manager of its own serving its metrics on
// metricsAddr ("0": none).
func startController(cfg *rest.Config, opts podidentity.Options, metricsAddr string) (stop func() error, err error) {
	ctrl.SetLogger(logr.Discard())
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: metricsAddr}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := podidentity.Setup(ctx, mgr, opts); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error { cancel(); return <-done }, nil
}
