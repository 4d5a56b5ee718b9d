package manager

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/config"
	"github.com/cerulean/cerulean/internal/manifests"
)

// InstallCRDs applies the embedded CRDs (server-side, so a newer binary updates them) and
// waits until every one is established.
func InstallCRDs(ctx context.Context, rc *rest.Config) error {
	// Unthrottled: with client-go's default limit the 27 applies and their waits took 9 s of
	// every `cerulean-local up`.
	rc = rest.CopyConfig(rc)
	rc.QPS = -1
	c, err := client.New(rc, client.Options{})
	if err != nil {
		return fmt.Errorf("connect to kube-apiserver: %w", err)
	}
	files, err := fs.Glob(config.CRDs, "crd/bases/*.yaml")
	if err != nil {
		return fmt.Errorf("list CRDs: %w", err)
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		b, err := config.CRDs.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		objs, err := manifests.Decode(b)
		if err != nil {
			return fmt.Errorf("decode %s: %w", f, err)
		}
		crds = append(crds, objs...)
	}
	if err := manifests.Apply(ctx, c, "cerulean", crds...); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	return manifests.WaitEstablished(ctx, c, time.Minute, crds...)
}
