// Package podidentitytest is test support for pod identity: it installs the
// aadpodidentity.k8s.io CRDs into a control plane and runs the assignment controller in a
// manager. Only tests and benchmarks import it; its test helpers fail the test on any error,
// the ...E forms (for benchmarks) return it.
package podidentitytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, aadv1.AddToScheme, apiextensionsv1.AddToScheme} {
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

// StartControllerE starts the controller in a manager of its own; stop ends it.
func StartControllerE(cfg *rest.Config, opts podidentity.Options) (stop func() error, err error) {
	ctrl.SetLogger(logr.Discard())
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
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
