package images

import (
	"archive/tar"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// PushOptions configure Push.
type PushOptions struct {
	// Archive is an image archive WriteArchive wrote (`make image`'s).
	Archive string
	// Registry is where the image goes: host[:port] and an optional path (ghcr.io/OWNER); the
	// image becomes REGISTRY/cerulean:TAG, TAG being the archive's (the version).
	Registry string
	// Insecure allows plain HTTP to a registry that is not on loopback (loopback always may).
	Insecure bool
	// Keychain finds the registry's credentials; nil: Docker's config (~/.docker/config.json,
	// DOCKER_CONFIG) and its credential helpers, as `docker login` leaves them.
	Keychain authn.Keychain
	// Transport is the HTTP transport; nil: http.DefaultTransport.
	Transport http.RoundTripper
}

// ErrPlainHTTP refuses plain HTTP to a registry that is neither on loopback nor allowed by
// PushOptions.Insecure: go-containerregistry would otherwise fall back to it silently for
// private addresses and *.local names.
var ErrPlainHTTP = errors.New("plain HTTP refused")

// Push pushes the archive's image to REGISTRY/cerulean:TAG and returns that reference with its
// digest. Every error is one line saying what to do.
func Push(ctx context.Context, opts PushOptions) (string, error) {
	reg := strings.TrimSuffix(strings.TrimSpace(opts.Registry), "/")
	if reg == "" {
		return "", errors.New("push: no registry given: name one, e.g. REGISTRY=ghcr.io/OWNER or REGISTRY=127.0.0.1:5000")
	}
	if strings.Contains(reg, "://") {
		return "", fmt.Errorf("push: registry %q: give host[:port]/path without a scheme (plain HTTP: loopback, or --insecure)", opts.Registry)
	}
	img, tag, dir, err := readArchive(opts.Archive)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir) // remote.Write reads the layout until it returns
	host := reg
	if i := strings.IndexByte(reg, '/'); i >= 0 {
		host = reg[:i]
	}
	plain := opts.Insecure || isLoopback(host)
	var nameOpts []name.Option
	if plain {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref, err := name.NewTag(reg+"/"+ProductRepository+":"+tag, append(nameOpts, name.StrictValidation)...)
	if err != nil {
		return "", fmt.Errorf("push: registry %q is not a registry name (host[:port]/path, lowercase): %w", opts.Registry, err)
	}
	keychain := opts.Keychain
	if keychain == nil {
		keychain = authn.DefaultKeychain
	}
	rt := opts.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	rt = httpGuard{next: rt, allow: plain}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain), remote.WithTransport(rt)); err != nil {
		return "", pushError(ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	return ref.String() + "@" + digest.String(), nil
}

// readArchive unpacks an archive WriteArchive wrote into a temporary directory, which the
// caller removes, and reads its one image and tag from there.
func readArchive(archive string) (v1.Image, string, string, error) {
	if archive == "" {
		return nil, "", "", errors.New("push: no image archive given (make image writes it)")
	}
	dir, err := os.MkdirTemp("", "cerulean-push-")
	if err != nil {
		return nil, "", "", fmt.Errorf("push: %w", err)
	}
	if err := untar(archive, dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", "", fmt.Errorf("push: read %s: %w (make image writes it)", archive, err)
	}
	img, tag, err := imageOf(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", "", fmt.Errorf("push: read %s: %w", archive, err)
	}
	return img, tag, dir, nil
}

// imageOf is the single image of an OCI layout and its tag (the ref name annotation).
func imageOf(dir string) (v1.Image, string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	if len(m.Manifests) != 1 {
		return nil, "", fmt.Errorf("the archive holds %d images, want 1", len(m.Manifests))
	}
	tag := m.Manifests[0].Annotations[ociRefNameAnnotation]
	if tag == "" {
		return nil, "", errors.New("the archive's image has no tag (" + ociRefNameAnnotation + ")")
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	return img, tag, err
}

// untar unpacks an image archive into dir, refusing any name that leaves it.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.FromSlash(strings.TrimSuffix(h.Name, "/"))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(p, 0o750); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := root.MkdirAll(filepath.Dir(p), 0o750); err != nil {
				return err
			}
			out, err := root.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr) //nolint:gosec // our own archive; blobs are as large as the image
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected entry %s in an image archive", h.Name)
		}
	}
}

// isLoopback reports whether host[:port] names this machine's loopback.
func isLoopback(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = strings.Trim(host, "[]")
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// httpGuard refuses plain-HTTP requests unless allowed.
type httpGuard struct {
	next  http.RoundTripper
	allow bool
}

func (g httpGuard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" && !g.allow {
		return nil, fmt.Errorf("%w to %s", ErrPlainHTTP, r.URL.Host)
	}
	return g.next.RoundTrip(r)
}

// pushError turns remote.Write's error into one actionable line.
func pushError(ref name.Tag, err error) error {
	host := ref.RegistryStr()
	var terr *transport.Error
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	var nerr net.Error
	switch {
	case errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden):
		return fmt.Errorf("push %s: the registry refused the credentials (HTTP %d): log in first (docker login %s, or a credential helper in ~/.docker/config.json) with a user that may push to %s",
			ref, terr.StatusCode, host, ref.Context())
	case errors.Is(err, ErrPlainHTTP):
		return fmt.Errorf("push %s: %s does not answer HTTPS and plain HTTP is allowed only to loopback: fix its TLS, or pass --insecure (make image-push INSECURE=1) for a registry you trust on your network", ref, host)
	case errors.As(err, &uerr), errors.As(err, &herr):
		return fmt.Errorf("push %s: the registry's TLS certificate is not trusted (%v): add its CA to the system's trust store or SSL_CERT_FILE", ref, oneLine(err))
	case errors.As(err, &terr):
		return fmt.Errorf("push %s: the registry answered HTTP %d: %s", ref, terr.StatusCode, oneLine(err))
	case errors.As(err, &nerr):
		return fmt.Errorf("push %s: cannot reach the registry %s (%s): check REGISTRY and that the registry runs", ref, host, oneLine(err))
	}
	return fmt.Errorf("push %s: %s", ref, oneLine(err))
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
