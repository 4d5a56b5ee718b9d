// Package images builds the container images the local node runs, from this module's Go
// binaries, with no registry: each image is one static binary in one layer, written as an OCI
// image layout in a tar file that `ctr images import` loads into the node's containerd.
// Images are reproducible: the same binary gives the same digest.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Registry is the host part of every local image's name. Nothing is ever pulled from it: the
// node's containerd refuses every pull, and pods use imagePullPolicy IfNotPresent or Never.
const Registry = "cerulean.local"

// AzureWorkloadIdentityVersion is the upstream module the proxy images are built from, as
// hack/tools/azure-workload-identity pins it.
const AzureWorkloadIdentityVersion = "v1.5.1"

// The images' names, as pods and the Helm chart name them.
const (
	Cerulean = Registry + "/cerulean:dev"
	Pause    = Registry + "/pause:3.10"
	TestApp  = Registry + "/test-app:dev"
	// AzwiProxy and AzwiProxyInit are Azure Workload Identity's proxy sidecar and its init
	// container, built from the upstream module, for the webhook's --proxy-image and
	// --proxy-init-image on the local node.
	AzwiProxy     = Registry + "/azure-workload-identity/proxy:" + AzureWorkloadIdentityVersion
	AzwiProxyInit = Registry + "/azure-workload-identity/proxy-init:" + AzureWorkloadIdentityVersion
)

// azwiTools is the tools group that pins the upstream module; the checksum database does not
// know the module (its go.sum pins the hash).
const (
	azwiTools  = "hack/tools/azure-workload-identity"
	azwiModule = "github.com/Azure/azure-workload-identity"
)

// Spec describes one image: which package of this module becomes its binary, and where.
type Spec struct {
	// Name is the image reference.
	Name string
	// Package is the Go package built, relative to the module root (./cmd/cerulean).
	Package string
	// Binary is the binary's path in the image; it is also the entrypoint.
	Binary string
	// File names the image's archive in the output directory.
	File string
	// Dir is the Go module the package is built in, relative to this module's root (a tools
	// group pinning a peer); empty: this module.
	Dir string
	// Env is added to go build's environment.
	Env []string
	// LDFlags, when set, replace Options.LDFlags (a peer's version stamp instead of ours).
	LDFlags string
	// User is the image's user, numeric (the kubelet checks runAsNonRoot against it); empty: root.
	User string
	// make, when set, builds the image instead of the steps above (an image that is not one
	// binary of a Go module).
	make func(ctx context.Context, modDir string) (v1.Image, error)
}

// All are the images `make images` builds.
var All = []Spec{
	{Name: Cerulean, Package: "./cmd/cerulean", Binary: "/usr/local/bin/cerulean", File: "cerulean.tar"},
	{Name: Pause, Package: "./internal/images/pause", Binary: "/pause", File: "pause.tar"},
	{Name: TestApp, Package: "./test/app", Binary: "/usr/local/bin/test-app", File: "test-app.tar"},
	// Upstream's proxy, unmodified, as its own image has it: /proxy, user 1501 (the id its init
	// container's rules let through to the real IMDS).
	{Name: AzwiProxy, Package: azwiModule + "/cmd/proxy", Binary: "/proxy", File: "azwi-proxy.tar", Dir: azwiTools,
		Env: []string{"GONOSUMDB=" + azwiModule}, User: "1501:1501",
		LDFlags: "-X " + azwiModule + "/pkg/version.BuildVersion=" + AzureWorkloadIdentityVersion},
	{Name: AzwiProxyInit, File: "azwi-proxy-init.tar", make: proxyInit},
}

// Options configure Build.
type Options struct {
	// ModuleDir is the root of this Go module; empty means found upwards from the working directory.
	ModuleDir string
	// OutDir receives one archive per image (Spec.File).
	OutDir string
	// Only limits the build to these image names; empty builds All.
	Only []string
	// LDFlags are passed to go build (version stamping).
	LDFlags string
	// Progress receives one line per image; nil discards them.
	Progress io.Writer
}

// Build compiles each image's binary for linux on this machine's architecture and writes its
// archive, atomically. It returns the archives' paths.
func Build(ctx context.Context, opts Options) ([]string, error) {
	if opts.OutDir == "" {
		return nil, errors.New("build images: no output directory given")
	}
	progress, modDir, err := defaults(opts.Progress, opts.ModuleDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.OutDir, 0o750); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	work, err := os.MkdirTemp(opts.OutDir, ".build-")
	if err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	defer os.RemoveAll(work)

	var out []string
	for _, s := range All {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, s.Name) {
			continue
		}
		img, err := buildImage(ctx, s, modDir, work, opts.LDFlags, progress)
		if err != nil {
			return nil, fmt.Errorf("build image %s: %w", s.Name, err)
		}
		dst := filepath.Join(opts.OutDir, s.File)
		if err := WriteArchive(dst, s.Name, img); err != nil {
			return nil, fmt.Errorf("build image %s: %w", s.Name, err)
		}
		out = append(out, dst)
	}
	return out, nil
}

// buildImage makes one image: its own make function, or go build of its package.
func buildImage(ctx context.Context, s Spec, modDir, work, ldflags string, progress io.Writer) (v1.Image, error) {
	if s.make != nil {
		fmt.Fprintf(progress, "building image %s…\n", s.Name)
		return s.make(ctx, modDir)
	}
	fmt.Fprintf(progress, "building image %s from %s…\n", s.Name, s.Package)
	if s.LDFlags != "" {
		ldflags = s.LDFlags
	}
	bin := filepath.Join(work, path.Base(s.Binary))
	if err := GoBuild(ctx, filepath.Join(modDir, s.Dir), s.Package, bin, ldflags, s.Env); err != nil {
		return nil, err
	}
	content, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	img, err := FromBinary(content, s.Binary)
	if err != nil || s.User == "" {
		return img, err
	}
	return withConfig(img, func(c *v1.Config) { c.User = s.User })
}

// GoBuild builds pkg, of the Go module in dir, to out as every image's binary is built: static
// (no cgo, so no dynamic loader), -trimpath, for linux on this machine's architecture. env is
// added to go build's environment. What measures the product (hack/bench) builds it this way too,
// so that the binary measured is the one users run.
func GoBuild(ctx context.Context, dir, pkg, out, ldflags string, env []string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// File is one entry of an image's layer: a regular file with Content, or a symlink to Link.
type File struct {
	Path    string
	Mode    int64
	Content []byte
	Link    string
}

// FromBinary is an image holding one executable at binary (also its entrypoint) and an empty,
// world-writable /tmp. Timestamps are zero so that the digest depends on the content only.
func FromBinary(content []byte, binary string) (v1.Image, error) {
	return FromFiles([]File{{Path: binary, Mode: 0o755, Content: content}}, binary)
}

// FromFiles is an image of one layer holding files (and the directories above them), an empty,
// world-writable /tmp, and entrypoint. Timestamps are zero so that the digest depends on the
// content only.
func FromFiles(files []File, entrypoint string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := []string{"tmp/"}
	for _, f := range files {
		for d := path.Dir(strings.TrimPrefix(f.Path, "/")); d != "." && d != "/"; d = path.Dir(d) {
			if !slices.Contains(dirs, d+"/") {
				dirs = append(dirs, d+"/")
			}
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
	}
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range files {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Size: int64(len(f.Content)), ModTime: time.Unix(0, 0)}
		if f.Link != "" {
			hdr = &tar.Header{Typeflag: tar.TypeSymlink, Name: hdr.Name, Linkname: f.Link, Mode: 0o777, ModTime: time.Unix(0, 0)}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write layer: %w", err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("make image: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("make image: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{entrypoint}
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("make image: %w", err)
	}
	return img, nil
}

// withConfig is img with its config changed by edit.
func withConfig(img v1.Image, edit func(*v1.Config)) (v1.Image, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("make image: %w", err)
	}
	cfg = cfg.DeepCopy()
	edit(&cfg.Config)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("make image: %w", err)
	}
	return img, nil
}

// Annotations containerd's importer reads to name an image of an OCI layout.
const (
	containerdNameAnnotation = "io.containerd.image.name"
	ociRefNameAnnotation     = "org.opencontainers.image.ref.name"
)

// WriteArchive writes img as an OCI image layout, tarred, to dst (atomically), named name.
func WriteArchive(dst, name string, img v1.Image) error {
	dir, err := os.MkdirTemp(filepath.Dir(dst), ".layout-")
	if err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	tag := name[strings.LastIndex(name, ":")+1:]
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		containerdNameAnnotation: name,
		ociRefNameAnnotation:     tag,
	})); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	tmp := dst + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

// tarDir writes the files under dir into a tar at dst, with stable names and zero timestamps.
func tarDir(dir, dst string) (err error) {
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", dst, cerr)
		}
	}()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	defer root.Close()
	tw := tar.NewWriter(f)
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = time.Unix(0, 0), 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := root.Open(rel)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if walkErr != nil {
		return fmt.Errorf("write %s: %w", dst, walkErr)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

// moduleRoot finds the enclosing directory with this module's go.mod.
// defaults fills in a build's progress writer (none: discard) and module directory (none:
// this module's root).
func defaults(progress io.Writer, modDir string) (io.Writer, string, error) {
	if progress == nil {
		progress = io.Discard
	}
	if modDir == "" {
		var err error
		if modDir, err = moduleRoot(); err != nil {
			return nil, "", err
		}
	}
	return progress, modDir, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/cerulean/cerulean\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: run inside the cerulean repository")
		}
		dir = parent
	}
}
