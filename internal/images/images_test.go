package images_test

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/testenv"
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

// The proxy images are named for the upstream version the tools group pins, which is the one
// they are built from.
func TestProxyImagesFollowThePin(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "hack", "tools", "azure-workload-identity", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "require github.com/Azure/azure-workload-identity " + images.AzureWorkloadIdentityVersion + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("hack/tools/azure-workload-identity/go.mod lacks %q", want)
	}
	for _, name := range []string{images.AzwiProxy, images.AzwiProxyInit} {
		if !strings.HasSuffix(name, ":"+images.AzureWorkloadIdentityVersion) {
			t.Errorf("image %s is not tagged with the pinned version", name)
		}
	}
}

// The proxy-init image is upstream's script with Debian's iptables and everything the loader
// needs for it: every library the binaries and extensions name is in the image.
func TestProxyInitImage(t *testing.T) {
	testenv.Tools(t, "make node", "iptables")
	out := t.TempDir()
	archives, err := images.Build(t.Context(), images.Options{OutDir: out, Only: []string{images.AzwiProxyInit}})
	if err != nil || len(archives) != 1 {
		t.Fatalf("build: %v %v", archives, err)
	}
	root := t.TempDir()
	if err := images.Untar(archives[0], root); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index: %v %v", m, err)
	}
	li, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := li.ConfigFile()
	if err != nil || cfg.Config.Entrypoint[0] != "/bin/init-iptables.sh" {
		t.Fatalf("config %+v %v", cfg, err)
	}
	files, links := layerFiles(t, li)
	if !strings.Contains(string(files["/bin/init-iptables.sh"]), "AZWI_PROXY_REDIRECT") || links["/usr/sbin/iptables"] != "xtables-nft-multi" {
		t.Errorf("script %q, iptables link %q", files["/bin/init-iptables.sh"], links["/usr/sbin/iptables"])
	}
	for name, b := range files {
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			continue // not an ELF object (the script, directories)
		}
		needed, err := f.ImportedLibraries()
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range needed {
			if files[path.Join("/usr/lib", multiarch(t), lib)] == nil {
				t.Errorf("%s needs %s, which the image lacks", name, lib)
			}
		}
	}
	if files["/bin/sh"] == nil || files["/usr/sbin/xtables-nft-multi"] == nil {
		t.Error("no /bin/sh or iptables in the image")
	}
}

func multiarch(t *testing.T) string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64-linux-gnu"
	case "arm64":
		return "aarch64-linux-gnu"
	}
	t.Fatalf("no Debian multiarch directory known for %s: the proxy-init image cannot be checked", runtime.GOARCH)
	return ""
}

// layerFiles reads an image's only layer: its regular files' contents and its symlinks' targets,
// by absolute path.
func layerFiles(t *testing.T, img v1.Image) (files map[string][]byte, links map[string]string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files, links = map[string][]byte{}, map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, links
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			links["/"+h.Name] = h.Linkname
		case tar.TypeReg:
			if files["/"+h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}
