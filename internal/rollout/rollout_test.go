package rollout_test

import (
	"bytes"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/rollout"
	"github.com/cerulean/cerulean/internal/rollout/rollouttest"
)

// armWrites counts the ARM requests that change something (PUT, PATCH, DELETE, POST) since seq.
// Token requests go to Entra ID, not ARM, so they are not among them.
func armWrites(az *cloud.Cloud, since uint64) []reqlog.Entry {
	var out []reqlog.Entry
	for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodPost} {
		out = append(out, az.Requests(reqlog.Filter{Service: "arm", Method: m, Since: since})...)
	}
	return out
}

func isForbidden(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusForbidden
}

// Three real control planes, each with its own CA and service-account issuer, registered in the
// local cloud as managed clusters bound to their issuers, with the OIDC issuer and workload
// identity still off. The rollout is run as a user runs it (the CLI entry, the AZURE_*
// environment, the rollout file):
//   - a fault on one identity creation fails that cluster only (exit code 1, the table says
//     why) and the others converge; a re-run finishes it and changes nothing on the others;
//   - a third run makes no ARM write at all;
//   - each cluster's identity is its own: cluster 1's identity cannot exchange cluster 2's token;
//   - revoking one cluster cuts only that cluster's vault access.
func TestRolloutAcrossThreeClusters(t *testing.T) {
	ctx := t.Context()
	planes, stop, err := rollouttest.StartPlanes(ctx, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	var cas [][]byte
	for _, cp := range planes {
		cas = append(cas, cp.CACertPEM)
	}
	az := cloudtest.Start(t, cloud.Options{TrustCAs: cas, ARM: cloudtest.FastARM()})
	lab, err := rollouttest.New(ctx, az, rollouttest.Options{Dir: t.TempDir(), Clusters: 3, Planes: planes})
	if err != nil {
		t.Fatal(err)
	}
	getenv := rollouttest.Getenv(lab.Azure)
	names := []string{rollouttest.ClusterName(0), rollouttest.ClusterName(1), rollouttest.ClusterName(2)}

	// --dry-run prints the plan and touches nothing.
	since := az.RequestLog().Last()
	var plan bytes.Buffer
	if err := rollout.RunCLI(ctx, rollout.CLIOptions{File: lab.File, DryRun: true, Getenv: getenv, Out: &plan}); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	for _, n := range names {
		if !strings.Contains(plan.String(), n+" (") || !strings.Contains(plan.String(), "create or reuse identity "+n+"-app") {
			t.Errorf("the plan does not name cluster %s and its identity:\n%s", n, plan.String())
		}
	}
	if got := az.Requests(reqlog.Filter{Since: since}); len(got) != 0 {
		t.Errorf("--dry-run made %d requests to the cloud, want none", len(got))
	}

	// First run: one identity creation fails (409, not retried by the SDK).
	if err := az.Faults().Set(faults.Config{Rules: []faults.Rule{{
		Name: "identity-conflict", Method: http.MethodPut, ResourceType: "Microsoft.ManagedIdentity/userAssignedIdentities", Status: 409, Count: 1,
	}}}); err != nil {
		t.Fatal(err)
	}
	var table, progress bytes.Buffer
	err = rollout.RunCLI(ctx, rollout.CLIOptions{File: lab.File, Parallel: 3, Getenv: getenv, Out: &table, Progress: &progress})
	t.Logf("first run:\n%s", table.String())
	var failed rollout.ErrClustersFailed
	if !errors.As(err, &failed) || failed.N != 1 {
		t.Fatalf("first run: err %v, want one cluster failed", err)
	}
	if code := failed.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	m := regexp.MustCompile(`(?m)^failed: (aks-\d) identity: create identity clusters/aks-\d-app: 409 `).FindStringSubmatch(table.String())
	if m == nil {
		t.Fatalf("the table does not say which cluster failed at the identity step and why:\n%s", table.String())
	}
	broken := m[1]
	for _, n := range names {
		line := tableLine(t, table.String(), n)
		want := n + " changed changed changed changed changed done" // verify reads: nothing to change
		if n == broken {
			want = n + " changed failed - - - -"
		}
		if line != want {
			t.Errorf("first run: %q, want %q", line, want)
		}
	}
	if !strings.Contains(progress.String(), broken+": identity failed") {
		t.Errorf("no progress line for the failure:\n%s", progress.String())
	}
	if strings.Contains(table.String()+progress.String(), lab.SecretValue) {
		t.Error("the secret's value reached the output")
	}
	if err := az.Faults().Set(faults.Config{}); err != nil {
		t.Fatal(err)
	}

	// Second run: the failed cluster resumes; the others change nothing.
	since = az.RequestLog().Last()
	cfg, err := rollout.Load(lab.File)
	if err != nil {
		t.Fatal(err)
	}
	report, err := rollout.Run(ctx, rollout.Options{Config: cfg, Azure: lab.Azure, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range report.Clusters {
		for _, s := range c.Steps {
			want := rollout.Done
			if c.Cluster == broken && s.Step != rollout.StepIssuer && s.Step != rollout.StepVerify {
				want = rollout.Changed
			}
			if s.Outcome != want {
				t.Errorf("second run: %s %s %s (%s), want %s", c.Cluster, s.Step, s.Outcome, s.Detail, want)
			}
		}
		if len(c.Steps) != len(rollout.Steps) {
			t.Errorf("second run: %s ran %d steps, want %d", c.Cluster, len(c.Steps), len(rollout.Steps))
		}
	}
	for _, w := range armWrites(az, since) {
		if !strings.Contains(strings.ToLower(w.Path), "/"+broken+"-app") && !strings.Contains(w.Path, "roleAssignments") {
			t.Errorf("second run wrote %s %s, which is not the resumed cluster's", w.Method, w.Path)
		}
	}

	// Third run: converged; not one ARM write.
	since = az.RequestLog().Last()
	report, err = rollout.Run(ctx, rollout.Options{Config: cfg, Azure: lab.Azure, Parallel: 3})
	if err != nil || report.Failed() {
		t.Fatalf("third run: %v %+v", err, report)
	}
	if w := armWrites(az, since); len(w) != 0 {
		t.Errorf("third run made %d ARM writes, want 0; first: %s %s", len(w), w[0].Method, w[0].Path)
	}
	for _, c := range report.Clusters {
		for _, s := range c.Steps {
			if s.Outcome != rollout.Done {
				t.Errorf("third run: %s %s %s", c.Cluster, s.Step, s.Outcome)
			}
		}
	}

	// A change of the app's values upgrades the release on every cluster, and writes nothing in ARM.
	cfg.App.Values["replicas"] = 2
	since = az.RequestLog().Last()
	report, err = rollout.Run(ctx, rollout.Options{Config: cfg, Azure: lab.Azure, Parallel: 3})
	if err != nil || report.Failed() {
		t.Fatalf("run with new values: %v %+v", err, report)
	}
	for _, c := range report.Clusters {
		if s := c.Step(rollout.StepDeploy); s.Outcome != rollout.Changed || !strings.Contains(s.Detail, "upgraded release app to revision 2") {
			t.Errorf("%s deploy after a values change: %s %s", c.Cluster, s.Outcome, s.Detail)
		}
		if s := c.Step(rollout.StepRole); s.Outcome != rollout.Done {
			t.Errorf("%s role after a values change: %s", c.Cluster, s.Outcome)
		}
	}
	if w := armWrites(az, since); len(w) != 0 {
		t.Errorf("a values change made %d ARM writes", len(w))
	}

	// Drift: cluster 3's identity deleted out of band. The next run makes a new one and follows
	// it through: federated credential, role, and the release upgraded with the new client id.
	driftCred, err := lab.Azure.Credential()
	if err != nil {
		t.Fatal(err)
	}
	driftOpts, err := lab.Azure.ARMOptions()
	if err != nil {
		t.Fatal(err)
	}
	driftIDs, err := armmsi.NewUserAssignedIdentitiesClient(lab.Azure.SubscriptionID, driftCred, driftOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := driftIDs.Delete(ctx, rollouttest.ClusterGroup, names[2]+"-app", nil); err != nil {
		t.Fatalf("delete %s's identity: %v", names[2], err)
	}
	report, err = rollout.Run(ctx, rollout.Options{Config: cfg, Azure: lab.Azure, Parallel: 3})
	if err != nil || report.Failed() {
		t.Fatalf("run after drift: %v %+v", err, report)
	}
	for _, c := range report.Clusters {
		for _, s := range c.Steps {
			want := rollout.Done
			if c.Cluster == names[2] && s.Step != rollout.StepIssuer && s.Step != rollout.StepVerify {
				want = rollout.Changed
			}
			if s.Outcome != want {
				t.Errorf("run after drift: %s %s %s (%s), want %s", c.Cluster, s.Step, s.Outcome, s.Detail, want)
			}
		}
	}

	// What the rollout left: each cluster's OIDC issuer is its own control plane's, its
	// identity is its own, and the app's service account carries that identity's client id.
	cred, err := lab.Azure.Credential()
	if err != nil {
		t.Fatal(err)
	}
	armOpts, err := lab.Azure.ARMOptions()
	if err != nil {
		t.Fatal(err)
	}
	mcs, err := armcontainerservice.NewManagedClustersClient(lab.Azure.SubscriptionID, cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(lab.Azure.SubscriptionID, cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	clientIDs := map[string]string{}
	kubes := map[string]kubernetes.Interface{}
	for i, n := range names {
		mc, err := mcs.Get(ctx, rollouttest.ClusterGroup, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := *mc.Properties.OidcIssuerProfile.IssuerURL; got != planes[i].IssuerURL || !*mc.Properties.SecurityProfile.WorkloadIdentity.Enabled {
			t.Errorf("%s: issuer %q (want %q), workload identity %v", n, got, planes[i].IssuerURL, *mc.Properties.SecurityProfile.WorkloadIdentity.Enabled)
		}
		id, err := ids.Get(ctx, rollouttest.ClusterGroup, n+"-app", nil)
		if err != nil {
			t.Fatalf("%s's identity: %v", n, err)
		}
		clientIDs[n] = *id.Properties.ClientID
		kubes[n] = kubernetes.NewForConfigOrDie(planes[i].RESTConfig)
		sa, err := kubes[n].CoreV1().ServiceAccounts(rollouttest.Namespace).Get(ctx, rollouttest.ServiceAccount, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the chart's service account: %v", n, err)
		}
		if got := sa.Annotations["azure.workload.identity/client-id"]; got != clientIDs[n] {
			t.Errorf("%s: service account annotated with client id %q, want its identity's %q", n, got, clientIDs[n])
		}
		if _, err := kubes[n].AppsV1().Deployments(rollouttest.Namespace).Get(ctx, "app", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: the chart's deployment: %v", n, err)
		}
	}
	if clientIDs[names[0]] == clientIDs[names[1]] || clientIDs[names[1]] == clientIDs[names[2]] {
		t.Errorf("clusters share an identity: %v", clientIDs)
	}

	probe := func(cluster, identityOf string) error {
		return rollout.Probe(ctx, rollout.ProbeOptions{
			Kube: kubes[cluster], Namespace: rollouttest.Namespace, ServiceAccount: rollouttest.ServiceAccount,
			Audience: rollout.DefaultAudience, Azure: lab.Azure, ClientID: clientIDs[identityOf],
			VaultURI: lab.VaultURI, Secret: rollouttest.SecretName,
		})
	}
	// Isolation: cluster 1's identity trusts only cluster 1's issuer.
	err = probe(names[1], names[0])
	if err == nil || !strings.Contains(err.Error(), "AADSTS") {
		t.Errorf("cluster 2's token exchanged for cluster 1's identity: err=%v, want an AADSTS error", err)
	}
	if err := probe(names[0], names[0]); err != nil {
		t.Errorf("cluster 1 with its own identity: %v", err)
	}
	// Without a secret to read, the probe still proves the exchange.
	if err := rollout.Probe(ctx, rollout.ProbeOptions{
		Kube: kubes[names[1]], Namespace: rollouttest.Namespace, ServiceAccount: rollouttest.ServiceAccount,
		Audience: rollout.DefaultAudience, Azure: lab.Azure, ClientID: clientIDs[names[1]], VaultURI: lab.VaultURI,
	}); err != nil {
		t.Errorf("token exchange alone: %v", err)
	}
	if err := rollout.Probe(ctx, rollout.ProbeOptions{
		Kube: kubes[names[1]], Namespace: rollouttest.Namespace, ServiceAccount: rollouttest.ServiceAccount,
		Audience: rollout.DefaultAudience, Azure: lab.Azure, ClientID: clientIDs[names[0]], VaultURI: lab.VaultURI,
	}); err == nil || !strings.Contains(err.Error(), "AADSTS") {
		t.Errorf("token exchange alone, across clusters: err=%v, want an AADSTS error", err)
	}

	// A service account the chart does not create fails verify at once, naming it; the steps
	// before it still converge (a federated credential for that subject).
	missing := *cfg
	missing.ServiceAccount = "missing"
	missing.Clusters = cfg.Clusters[:1]
	report, err = rollout.Run(ctx, rollout.Options{Config: &missing, Azure: lab.Azure, VerifyTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if v := report.Clusters[0].Step(rollout.StepVerify); v.Outcome != rollout.Failed || !strings.Contains(v.Detail, `serviceaccounts "missing" not found`) {
		t.Errorf("verify of a missing service account: %s %q", v.Outcome, v.Detail)
	}
	if f := report.Clusters[0].Step(rollout.StepFederation); f.Outcome != rollout.Changed {
		t.Errorf("federation for the new subject: %s", f.Outcome)
	}

	// Revoke one cluster: only its role assignment goes.
	since = az.RequestLog().Last()
	var out bytes.Buffer
	if err := rollout.RunRevokeCLI(ctx, rollout.RevokeCLIOptions{File: lab.File, Cluster: names[0], Getenv: getenv, Out: &out}); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if !strings.Contains(out.String(), "removed") {
		t.Errorf("revoke said %q", out.String())
	}
	if w := armWrites(az, since); len(w) != 1 || w[0].Method != http.MethodDelete || !strings.Contains(w[0].Path, "roleAssignments") {
		t.Errorf("revoke wrote %v, want one role-assignment DELETE", w)
	}
	if err := probe(names[0], names[0]); !isForbidden(err) {
		t.Errorf("revoked cluster still reads: err=%v, want 403", err)
	}
	for _, n := range names[1:] {
		if err := probe(n, n); err != nil {
			t.Errorf("%s lost access when %s was revoked: %v", n, names[0], err)
		}
	}
	out.Reset()
	if err := rollout.RunRevokeCLI(ctx, rollout.RevokeCLIOptions{File: lab.File, Cluster: names[0], Getenv: getenv, Out: &out}); err != nil || !strings.Contains(out.String(), "no role assignment") {
		t.Errorf("second revoke: %v %q", err, out.String())
	}
	if err := rollout.RunRevokeCLI(ctx, rollout.RevokeCLIOptions{File: lab.File, Cluster: "aks-9", Getenv: getenv, Out: &out}); err == nil || !strings.Contains(err.Error(), "aks-1, aks-2, aks-3") {
		t.Errorf("revoke of an unknown cluster: %v", err)
	}
}

// tableLine is the table's row for cluster, with its cells separated by one space.
func tableLine(t *testing.T, table, cluster string) string {
	t.Helper()
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == cluster {
			return strings.Join(f, " ")
		}
	}
	t.Fatalf("no row for %s in:\n%s", cluster, table)
	return ""
}
