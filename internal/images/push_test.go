package images_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/images/registrytest"
)

// archive writes a small image as `make image` writes the product's, tagged version.
func archive(t *testing.T, version string) (string, string) {
	t.Helper()
	img, err := images.FromBinary([]byte("#!binary"), "/usr/local/bin/cerulean")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "cerulean-image.tar")
	if err := images.WriteArchive(dst, images.ProductName(version), img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return dst, d.String()
}

// The image lands in a real registry as REGISTRY/cerulean:VERSION, byte for byte; plain HTTP
// to loopback needs no flag.
func TestPushToALoopbackRegistry(t *testing.T) {
	host := registrytest.Start(t, registrytest.Options{})
	src, digest := archive(t, "1.2.3")
	ref, err := images.Push(t.Context(), images.PushOptions{Archive: src, Registry: host + "/team/apps", Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatal(err)
	}
	want := host + "/team/apps/cerulean:1.2.3@" + digest
	if ref != want {
		t.Errorf("pushed %s, want %s", ref, want)
	}
	tag, err := name.NewTag(host+"/team/apps/cerulean:1.2.3", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(tag, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("the registry lacks the tag: %v", err)
	}
	if desc.Digest.String() != digest {
		t.Errorf("the registry's tag is %s, the archive's image %s", desc.Digest, digest)
	}
}

// Bad input gets one line that says what to do.
func TestPushFailsClearly(t *testing.T) {
	src, _ := archive(t, "1.2.3")
	locked := registrytest.Start(t, registrytest.Options{User: "ci", Password: "right"})
	// A port that refuses: listen, then close.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	for _, tc := range []struct {
		name string
		opts images.PushOptions
		want string
	}{
		{"no registry", images.PushOptions{Archive: src}, "no registry given"},
		{"scheme", images.PushOptions{Archive: src, Registry: "http://" + locked}, "without a scheme"},
		{"no archive", images.PushOptions{Archive: filepath.Join(t.TempDir(), "none.tar"), Registry: locked}, "make image writes it"},
		{"unreachable", images.PushOptions{Archive: src, Registry: closed}, "cannot reach the registry " + closed},
		{"no credentials", images.PushOptions{Archive: src, Registry: locked, Keychain: authn.NewMultiKeychain()}, "refused the credentials (HTTP 401): log in first"},
		{"wrong password", images.PushOptions{Archive: src, Registry: locked, Keychain: static{authn.Basic{Username: "ci", Password: "wrong"}}}, "refused the credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := images.Push(t.Context(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "wrong") && tc.name == "wrong password" {
				t.Errorf("the error shows the password: %q", err)
			}
		})
	}
	// The right credentials pass.
	if _, err := images.Push(t.Context(), images.PushOptions{Archive: src, Registry: locked, Keychain: static{authn.Basic{Username: "ci", Password: "right"}}}); err != nil {
		t.Errorf("push with the right credentials: %v", err)
	}
}

// A registry off loopback that answers only plain HTTP is refused unless --insecure says so:
// go-containerregistry alone would fall back to HTTP for private addresses and .local names.
func TestPushRefusesPlainHTTPOffLoopback(t *testing.T) {
	host := registrytest.Start(t, registrytest.Options{})
	_, port, _ := net.SplitHostPort(host)
	src, _ := archive(t, "1.2.3")
	// registry.local resolves, through this transport only, to the loopback registry.
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, host)
	}
	rt := &http.Transport{DialContext: dial}
	opts := images.PushOptions{Archive: src, Registry: "registry.local:" + port, Keychain: authn.NewMultiKeychain(), Transport: rt}
	_, err := images.Push(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), "plain HTTP is allowed only to loopback") || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("push over plain HTTP off loopback: %v, want a refusal naming --insecure", err)
	}
	opts.Insecure = true
	if _, err := images.Push(t.Context(), opts); err != nil {
		t.Errorf("push with --insecure: %v", err)
	}
}

type static struct{ authn.Basic }

func (s static) Resolve(authn.Resource) (authn.Authenticator, error) { return &s.Basic, nil }
