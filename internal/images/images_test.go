package images_test

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cerulean/cerulean/internal/images"
)

// An image is the binary, executable, at its path and as its entrypoint, for this architecture,
// and its digest depends on the content alone.
func TestFromBinary(t *testing.T) {
	img, err := images.FromBinary([]byte("#!binary"), "/usr/local/bin/app")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/usr/local/bin/app" {
		t.Errorf("config: os %q arch %q entrypoint %q", cfg.OS, cfg.Architecture, cfg.Config.Entrypoint)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	modes := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
	}
	if modes["usr/local/bin/app"] != 0o755 || modes["tmp/"] != 0o1777 {
		t.Errorf("layer entries and modes: %v", modes)
	}

	again, err := images.FromBinary([]byte("#!binary"), "/usr/local/bin/app")
	if err != nil {
		t.Fatal(err)
	}
	other, err := images.FromBinary([]byte("#!other"), "/usr/local/bin/app")
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	d3, _ := other.Digest()
	if d1 != d2 || d1 == d3 {
		t.Errorf("digests %s, %s (same binary), %s (another)", d1, d2, d3)
	}
}

// The archive is an OCI layout whose index names the image the way containerd's importer reads it.
func TestWriteArchiveNamesTheImage(t *testing.T) {
	img, err := images.FromBinary([]byte("x"), "/x")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "x.tar")
	if err := images.WriteArchive(dst, images.TestApp, img); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	found := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		found[h.Name] = true
		if h.Name == "index.json" {
			if err := json.NewDecoder(tr).Decode(&index); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !found["oci-layout"] || len(index.Manifests) != 1 {
		t.Fatalf("archive entries %v, index %+v", found, index)
	}
	m := index.Manifests[0]
	if m.Annotations["io.containerd.image.name"] != images.TestApp || m.Annotations["org.opencontainers.image.ref.name"] != "dev" {
		t.Errorf("annotations %v", m.Annotations)
	}
	digest, _ := img.Digest()
	if m.Digest != digest.String() || !found["blobs/sha256/"+digest.Hex] {
		t.Errorf("index names %s, image is %s (blob present: %v)", m.Digest, digest, found["blobs/sha256/"+digest.Hex])
	}
}

// Build refuses to run without an output directory.
func TestBuildFailsClearly(t *testing.T) {
	if _, err := images.Build(t.Context(), images.Options{}); err == nil {
		t.Error("Build without an output directory succeeded")
	}
}
