// Package registrytest runs a real OCI registry for tests: the distribution project's registry
// (the one Docker's registry image runs), in-process, on loopback, storing blobs in a test
// directory.
package registrytest

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"

	// The registry's storage driver and its basic-auth access controller register themselves.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

// Options configure Start.
type Options struct {
	// User and Password, when set, are the only credentials the registry accepts (HTTP basic
	// auth, as an htpasswd file); otherwise it accepts anyone.
	User, Password string
	// Addr is where it listens; empty: a free port on 127.0.0.1.
	Addr string
}

// Start runs a registry until the test ends and returns its host:port, served over plain HTTP.
func Start(t testing.TB, opts Options) string {
	t.Helper()
	dir := t.TempDir()
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": filepath.Join(dir, "data")}}
	cfg.HTTP.Secret = "registrytest"
	if opts.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(file, []byte(opts.User+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "registrytest", "path": file}}
	}
	// The registry logs through logrus's standard logger, every request at info and each
	// expected 404 of a push (HEAD of a blob it lacks) at error: the tests check outcomes.
	logrus.SetLevel(logrus.FatalLevel)
	ctx, cancel := context.WithCancel(context.Background())
	app := handlers.NewApp(ctx, cfg)
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		t.Fatalf("registry: %v", err)
	}
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 0}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		cancel()
	})
	return l.Addr().String()
}
