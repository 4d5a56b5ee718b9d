// Package security holds the index of the security probes: every attack tried on a running
// `cerulean-local up` (the list below) and the test that keeps it refused. The probes run in
// their own packages, next to the harness each needs (the real API server, the local cloud, the
// node); this test fails when one of them is removed, renamed or made to skip, so the list
// stays whole. Add a row with every new probe.
package security

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type probe struct {
	attack string
	pkg    string   // the directory, from the repository's root
	tests  []string // top-level tests there that assert the attack fails
}

var probes = []probe{
	{"A resume-token annotation sends the manager's ARM token to another host",
		"internal/manager", []string{"TestResumeTokenCannotRedirect"}},
	{"A resource-id annotation redirects a delete to another resource",
		"internal/manager", []string{"TestResourceIDAnnotationCannotRedirectDelete"}},
	{"An object made for another team's resource (finalizer and resource-id by hand) deletes it",
		"internal/manager", []string{"TestUngrantedDeleteSendsNothing"}},
	{"A namespace's deletion sticks once its credential Secret is gone",
		"internal/manager", []string{"TestNamespaceDeletionWithCredentialSecrets"}},
	{"Deleting the CRDs deletes data in Azure",
		"internal/manager", []string{"TestCRDDeletionDetaches", "TestCRDDeletionDetachesControlPlaneIdentities"}},
	{"IMDS path spellings reach the node's identity",
		"internal/podidentity/nodeagent", []string{"TestPathSpellingsNeverReachIMDS"}},
	{"A namespace uses an identity it was not granted (controller)",
		"internal/controller/podidentity", []string{"TestUngrantedIdentityNeverReachesANode"}},
	{"A namespace uses an identity or a scope it was not granted (admission)",
		"internal/webhook/webhooks", []string{"TestManagerServesTheWebhookOnLoopback"}},
	{"A namespace on the global credential acts on any scope",
		"internal/manager", []string{"TestScopesAreGrantedToNamespaces", "TestNewGrantAppliesAtOnce"}},
	{"An export expression that does not compile creates something in Azure",
		"internal/manager", []string{"TestBadExpressionCreatesNothing"}},
	{"An export expression passes admission with the scope checks off",
		"internal/webhook/armgrants", []string{"TestScopesOffStillRefusesBadExpressions"}},
	{"A long Warning Event is lost",
		"internal/controller/record", []string{"TestNoteKeepsFirstLineAndCode"}},
	{"An owner cycle waits forever",
		"internal/manager", []string{"TestOwnerCycles"}},
	{"Names and tags ARM refuses pass the schema",
		"internal/manager", []string{"TestSchemaCarriesAzureLimits"}},
}

// TestEveryProbeHasItsTest: each probe's tests exist as top-level tests of their package and
// never call Skip (a probe that skips protects nothing).
func TestEveryProbeHasItsTest(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, p := range probes {
		funcs := testFuncs(t, filepath.Join(root, p.pkg))
		for _, name := range p.tests {
			src, ok := funcs[name]
			switch {
			case !ok:
				t.Errorf("%q: %s has no test %s", p.attack, p.pkg, name)
			case strings.Contains(src, ".Skip"):
				t.Errorf("%q: %s.%s can skip", p.attack, p.pkg, name)
			}
		}
	}
}

// testFuncs maps the top-level Test functions of dir's test files to their source.
func testFuncs(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no test files (%v)", dir, err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			out[fn.Name.Name] = string(b[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset])
		}
	}
	return out
}
