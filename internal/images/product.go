package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ProductRepository is the product image's repository name below a registry (REGISTRY/cerulean).
const ProductRepository = "cerulean"

// The OCI labels the product image carries (the image-spec's pre-defined annotation keys).
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
)

// ProductOptions configure BuildProduct.
type ProductOptions struct {
	// ModuleDir is the root of this Go module; empty means found upwards from the working directory.
	ModuleDir string
	// Out is the archive written (an OCI image layout in a tar file).
	Out string
	// Version tags the image and is stamped into the binary; it is also the chart's version.
	Version string
	// Revision is the source's commit; Source the repository's URL.
	Revision, Source string
	// LDFlags are passed to go build besides the version stamp.
	LDFlags string
	// Progress receives one line; nil discards it.
	Progress io.Writer
}

// ProductName is the product image's name in its archive, before a push gives it a registry:
// the local images' registry, so that the archive imported into the local node is usable as is.
func ProductName(version string) string { return Registry + "/" + ProductRepository + ":" + version }

// BuildProduct builds the product image, the one a user publishes: bin/cerulean alone (static,
// built as the local node's cerulean image is), its version, commit and source in OCI labels.
// It is reproducible: the same source and options give the same bytes.
func BuildProduct(ctx context.Context, opts ProductOptions) (v1.Image, error) {
	if opts.Out == "" || opts.Version == "" {
		return nil, errors.New("build the product image: an output file and a version are needed")
	}
	progress, modDir, err := defaults(opts.Progress, opts.ModuleDir)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(opts.Out)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("build the product image: %w", err)
	}
	work, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return nil, fmt.Errorf("build the product image: %w", err)
	}
	defer os.RemoveAll(work)

	// The local node's cerulean image: the same binary, built the same way.
	i := slices.IndexFunc(All, func(s Spec) bool { return s.Name == Cerulean })
	spec := All[i]
	spec.Name = ProductName(opts.Version)
	ldflags := opts.LDFlags + " -X github.com/cerulean/cerulean/internal/version.Version=" + opts.Version
	if opts.Revision != "" {
		ldflags += " -X github.com/cerulean/cerulean/internal/version.Commit=" + opts.Revision
	}
	img, err := buildImage(ctx, spec, modDir, work, ldflags, progress)
	if err != nil {
		return nil, fmt.Errorf("build the product image: %w", err)
	}
	img, err = withConfig(img, func(c *v1.Config) {
		c.Labels = map[string]string{LabelVersion: opts.Version, LabelRevision: opts.Revision, LabelSource: opts.Source}
	})
	if err != nil {
		return nil, err
	}
	if err := WriteArchive(opts.Out, spec.Name, img); err != nil {
		return nil, fmt.Errorf("build the product image: %w", err)
	}
	return img, nil
}
