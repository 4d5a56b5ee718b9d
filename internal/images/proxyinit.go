package images

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The proxy-init image is upstream's as its Dockerfile describes it, without its base image:
// the module's init/init-iptables.sh run by /bin/sh, with iptables (nf_tables backend) and the
// shared libraries and xtables extensions both need, taken from this machine's Debian packages
// (dash, iptables; `make node` installs iptables). Nothing is downloaded but the Go module.
const (
	proxyInitScript = "init/init-iptables.sh"
	proxyInitEntry  = "/bin/init-iptables.sh"
	hostShell       = "/bin/sh"
	hostIptables    = "/usr/sbin/xtables-nft-multi"
)

// multiarch is Debian's library directory name for an architecture.
var multiarch = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}

// ErrNoIptables reports a machine without Debian's iptables, which the proxy-init image copies.
var ErrNoIptables = errors.New("the proxy-init image needs Debian's iptables and dash on this machine (`make node` installs iptables)")

func proxyInit(ctx context.Context, modDir string) (v1.Image, error) {
	triplet, ok := multiarch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("the proxy-init image is built from Debian's files for amd64 or arm64, not %s", runtime.GOARCH)
	}
	script, err := upstreamFile(ctx, filepath.Join(modDir, azwiTools), azwiModule, proxyInitScript)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{hostShell, hostIptables} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoIptables, err)
		}
	}
	libDir := "/usr/lib/" + triplet
	extensions, err := filepath.Glob(filepath.Join(libDir, "xtables", "*.so"))
	if err != nil || len(extensions) == 0 {
		return nil, fmt.Errorf("%w: no xtables extensions in %s/xtables", ErrNoIptables, libDir)
	}
	files := []File{
		{Path: proxyInitEntry, Mode: 0o755, Content: script},
		{Path: "/usr/sbin/iptables", Link: "xtables-nft-multi"},
	}
	add := func(dst, src string) error {
		b, err := os.ReadFile(src) // follows symlinks: the image gets the file itself
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNoIptables, err)
		}
		files = append(files, File{Path: dst, Mode: 0o755, Content: b})
		return nil
	}
	// The binaries and extensions, then every library they need, transitively, where the
	// dynamic loader looks for it without a cache (the multiarch directory).
	objects := map[string]string{hostShell: hostShell, hostIptables: hostIptables}
	for _, e := range extensions {
		objects[path.Join(libDir, "xtables", filepath.Base(e))] = e
	}
	queue := slices.Sorted(func(yield func(string) bool) {
		for dst := range objects {
			if !yield(dst) {
				return
			}
		}
	})
	for len(queue) > 0 {
		dst := queue[0]
		queue = queue[1:]
		src := objects[dst]
		if err := add(dst, src); err != nil {
			return nil, err
		}
		interp, needed, err := elfNeeds(src)
		if err != nil {
			return nil, err
		}
		next := map[string]string{}
		if interp != "" {
			next[interp] = interp
		}
		for _, lib := range needed {
			next[path.Join(libDir, lib)] = findLib(triplet, lib)
		}
		for _, d := range slices.Sorted(func(yield func(string) bool) {
			for k := range next {
				if !yield(k) {
					return
				}
			}
		}) {
			if _, seen := objects[d]; !seen {
				objects[d] = next[d]
				queue = append(queue, d)
			}
		}
	}
	img, err := FromFiles(files, proxyInitEntry)
	if err != nil {
		return nil, err
	}
	return withConfig(img, func(c *v1.Config) { c.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"} })
}

// elfNeeds reads an ELF object's interpreter (executables) and the libraries it needs.
func elfNeeds(file string) (string, []string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", file, err)
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", nil, fmt.Errorf("read %s: %w", file, err)
			}
			interp = string(b[:max(0, len(b)-1)]) // NUL-terminated
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", file, err)
	}
	return interp, needed, nil
}

// findLib is where this machine has lib: its multiarch directories, usr-merged or not.
func findLib(triplet, lib string) string {
	for _, dir := range []string{"/usr/lib/" + triplet, "/lib/" + triplet, "/usr/lib", "/lib"} {
		if _, err := os.Stat(filepath.Join(dir, lib)); err == nil {
			return filepath.Join(dir, lib)
		}
	}
	return filepath.Join("/usr/lib", triplet, lib) // reported missing when read
}

// upstreamFile reads a file of the module pinned by the tools group in dir, downloading the
// module (its hash is in the group's go.sum) when the module cache lacks it.
func upstreamFile(ctx context.Context, dir, module, file string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GONOSUMDB="+module)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("download %s in %s: %w", module, dir, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("download %s in %s: %w", module, dir, err)
	}
	if m.Dir == "" {
		return nil, fmt.Errorf("download %s in %s: %s", module, dir, m.Error)
	}
	b, err := os.ReadFile(filepath.Join(m.Dir, file))
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", file, module, err)
	}
	return b, nil
}
