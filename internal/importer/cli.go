package importer

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/cerulean/cerulean/internal/azure"
)

// CLIOptions are the flags of `cerulean import`.
type CLIOptions struct {
	IDs              []string
	Namespace        string
	ReconcilePolicy  string
	SecretReferences bool
	// APIVersions are TYPE=VERSION pairs (--api-version).
	APIVersions []string
	// Output is a directory for one file per manifest; empty writes to Out.
	Output string
	Getenv func(string) string
	Out    io.Writer
}

// RunCLI is `cerulean import ARMID...`: it reads with the credential of the AZURE_* variables
// (as rollout and doctor do) and writes the manifests only once every resource was read.
func RunCLI(ctx context.Context, o CLIOptions) error {
	if err := checkPolicy(o.ReconcilePolicy); err != nil {
		return err
	}
	for _, id := range o.IDs { // bad input is named before the credential is asked for
		if _, err := parseID(id); err != nil {
			return err
		}
	}
	versions := map[string]string{}
	for _, p := range o.APIVersions {
		typ, v, ok := strings.Cut(p, "=")
		if !ok || !strings.Contains(typ, "/") || v == "" {
			return fmt.Errorf("--api-version %q: want TYPE=VERSION, e.g. Microsoft.ServiceBus/namespaces=2021-11-01", p)
		}
		versions[typ] = v
	}
	cfg := azure.ConfigFromEnv(o.Getenv)
	cred, err := cfg.Credential()
	if err != nil {
		return err
	}
	armOpts, err := cfg.ARMOptions()
	if err != nil {
		return err
	}
	r, err := newSDKReader(cred, armOpts)
	if err != nil {
		return err
	}
	ms, err := Import(ctx, r, Options{IDs: o.IDs, Namespace: o.Namespace, ReconcilePolicy: o.ReconcilePolicy,
		SecretReferences: o.SecretReferences, APIVersions: versions})
	if err != nil {
		return err
	}
	if o.Output != "" {
		return WriteDir(o.Output, ms)
	}
	return Write(o.Out, ms)
}
