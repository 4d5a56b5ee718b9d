package images_test

import (
	"bytes"
	"debug/elf"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/cerulean/cerulean/internal/images"
)

// The product image is bin/cerulean alone, static, with its version, commit and source in OCI
// labels, and the same bytes when built twice.
func TestBuildProduct(t *testing.T) {
	dir := t.TempDir()
	opts := images.ProductOptions{Out: filepath.Join(dir, "a.tar"), Version: "1.2.3", Revision: "0123abcd", Source: "https://example.com/cerulean"}
	if _, err := images.BuildProduct(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	opts.Out = filepath.Join(dir, "b.tar")
	img, err := images.BuildProduct(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.tar"))
	b, _ := os.ReadFile(filepath.Join(dir, "b.tar"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("two builds differ (%d and %d bytes)", len(a), len(b))
	}

	// The archive names the image with the version as its tag.
	root := t.TempDir()
	if err := images.Untar(opts.Out, root); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Annotations["io.containerd.image.name"] != images.ProductName("1.2.3") {
		t.Fatalf("index %+v %v", m, err)
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{images.LabelVersion: "1.2.3", images.LabelRevision: "0123abcd", images.LabelSource: "https://example.com/cerulean"} {
		if cfg.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cfg.Config.Labels[k], v)
		}
	}
	files, _ := layerFiles(t, img)
	bin := files["/usr/local/bin/cerulean"]
	if len(files) != 1 || bin == nil {
		t.Fatalf("files in the image: %v, want the binary alone", slices.Collect(maps.Keys(files)))
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked")
		}
	}
	if !bytes.Contains(bin, []byte("1.2.3")) {
		t.Error("the binary does not carry the version")
	}
}
