// Package rollout is `cerulean rollout`: for each cluster of a rollout file it enables the OIDC
// issuer and workload identity, creates or reuses the cluster's managed identity, federates the
// app's service account, grants the identity a role on the shared Key Vault, installs or upgrades
// the app's Helm chart with the identity's client id, and verifies that the app's service account
// reads a vault secret. Every step reads before it writes, so a re-run resumes where a failure
// stopped and changes nothing already done.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/azure"
)

// The steps, in order, as the table's columns.
const (
	StepIssuer     = "issuer"     // OIDC issuer + workload identity on, issuer URL read
	StepIdentity   = "identity"   // the cluster's managed identity
	StepFederation = "federation" // its federated credential for the app's service account
	StepRole       = "role"       // its role on the vault
	StepDeploy     = "deploy"     // the app's chart
	StepVerify     = "verify"     // the app's token reads the vault
)

// Steps lists the steps in order.
var Steps = []string{StepIssuer, StepIdentity, StepFederation, StepRole, StepDeploy, StepVerify}

// Outcome is what a step did.
type Outcome string

// Outcomes.
const (
	Done    Outcome = "done"    // already as wanted: nothing written
	Changed Outcome = "changed" // written
	Failed  Outcome = "failed"
	Skipped Outcome = "-" // not reached: an earlier step failed
)

// StepResult is one step on one cluster.
type StepResult struct {
	Step    string
	Outcome Outcome
	// Detail says what was found or done, or why the step failed.
	Detail string
}

// ClusterResult is one cluster's steps.
type ClusterResult struct {
	Cluster string
	Steps   []StepResult
}

// Failed reports whether a step failed.
func (c ClusterResult) Failed() bool {
	for _, s := range c.Steps {
		if s.Outcome == Failed {
			return true
		}
	}
	return false
}

// Step returns the result of one step.
func (c ClusterResult) Step(name string) StepResult {
	for _, s := range c.Steps {
		if s.Step == name {
			return s
		}
	}
	return StepResult{Step: name, Outcome: Skipped}
}

// Report is a whole run, clusters in the file's order.
type Report struct {
	Clusters []ClusterResult
}

// Failed reports whether any cluster failed.
func (r Report) Failed() bool {
	for _, c := range r.Clusters {
		if c.Failed() {
			return true
		}
	}
	return false
}

// Cluster returns the result of the named cluster.
func (r Report) Cluster(name string) (ClusterResult, bool) {
	for _, c := range r.Clusters {
		if strings.EqualFold(c.Cluster, name) {
			return c, true
		}
	}
	return ClusterResult{}, false
}

// WriteTable writes clusters × steps: done, changed, or failed with the reason.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "CLUSTER\t%s\n", strings.ToUpper(strings.Join(Steps, "\t")))
	var reasons []string
	for _, c := range r.Clusters {
		cells := make([]string, 0, len(Steps))
		for _, s := range Steps {
			res := c.Step(s)
			cells = append(cells, string(res.Outcome))
			if res.Outcome == Failed {
				reasons = append(reasons, fmt.Sprintf("%s %s: %s", c.Cluster, s, res.Detail))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", c.Cluster, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range reasons {
		if _, err := fmt.Fprintf(w, "failed: %s\n", line); err != nil {
			return err
		}
	}
	return nil
}

// Options configure Run.
type Options struct {
	Config *Config
	// Azure is where the cloud is and who runs the rollout (AZURE_* from the environment).
	Azure azure.Config
	// Parallel is how many clusters run at once; 0 means 4.
	Parallel int
	// Progress receives one line per cluster and step; nil discards them.
	Progress io.Writer
	// DeployTimeout bounds Helm's install or upgrade; 0 means five minutes.
	DeployTimeout time.Duration
	// VerifyTimeout bounds the retries of the verify step (role assignments and federated
	// credentials take a while to reach Entra ID and Key Vault in Azure); 0 means two minutes.
	VerifyTimeout time.Duration
	// RetryInterval is the pause between verify attempts; 0 means five seconds.
	RetryInterval time.Duration
	// After is the clock's timer (time.After in production).
	After func(time.Duration) <-chan time.Time
}

func (o *Options) defaults() {
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.DeployTimeout == 0 {
		o.DeployTimeout = 5 * time.Minute
	}
	if o.VerifyTimeout == 0 {
		o.VerifyTimeout = 2 * time.Minute
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = 5 * time.Second
	}
	if o.After == nil {
		o.After = time.After
	}
}

// runner holds what the clusters share.
type runner struct {
	opts  Options
	cfg   *Config
	pool  *armPool
	chart *chartSpec

	once     sync.Once
	shared   sharedState
	sharedEr error

	progressMu sync.Mutex
}

// sharedState is read once per run: the vault's address and the role's definition id.
type sharedState struct {
	vaultURI  string
	roleDefID string
}

func newRunner(opts Options) (*runner, error) {
	if opts.Config == nil {
		return nil, errors.New("run rollout: no configuration")
	}
	opts.defaults()
	cred, err := opts.Azure.Credential()
	if err != nil {
		return nil, fmt.Errorf("build Azure credential: %w", err)
	}
	armOpts, err := opts.Azure.ARMOptions()
	if err != nil {
		return nil, fmt.Errorf("build ARM options: %w", err)
	}
	return &runner{opts: opts, cfg: opts.Config, pool: newARMPool(cred, armOpts)}, nil
}

// Run rolls out to every cluster, Parallel at a time, and returns the report. A cluster's
// failure stops that cluster only; the error is for what stops the whole run (bad chart,
// no credential).
func Run(ctx context.Context, opts Options) (Report, error) {
	r, err := newRunner(opts)
	if err != nil {
		return Report{}, err
	}
	if r.chart, err = loadChart(r.cfg.App); err != nil {
		return Report{}, err
	}
	report := Report{Clusters: make([]ClusterResult, len(r.cfg.Clusters))}
	for i, cl := range r.cfg.Clusters {
		report.Clusters[i].Cluster = cl.Name() // a cluster an interrupt never reached shows as not run
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Parallel)
	for i, cl := range r.cfg.Clusters {
		g.Go(func() error {
			report.Clusters[i] = r.cluster(gctx, cl)
			return nil
		})
	}
	_ = g.Wait()
	return report, ctx.Err()
}

func (r *runner) progress(cluster string, s StepResult) {
	r.progressMu.Lock()
	defer r.progressMu.Unlock()
	fmt.Fprintf(r.opts.Progress, "%s: %s %s", cluster, s.Step, s.Outcome)
	if s.Detail != "" {
		fmt.Fprintf(r.opts.Progress, ": %s", s.Detail)
	}
	fmt.Fprintln(r.opts.Progress)
}

func (r *runner) sharedState(ctx context.Context) (sharedState, error) {
	r.once.Do(func() {
		vid := r.cfg.KeyVault.id
		c, err := r.pool.get(vid.SubscriptionID)
		if err != nil {
			r.sharedEr = err
			return
		}
		if r.shared.vaultURI, err = vaultURI(ctx, c, vid); err != nil {
			r.sharedEr = err
			return
		}
		r.shared.roleDefID, r.sharedEr = resolveRole(ctx, c, vid, r.cfg.Role)
	})
	return r.shared, r.sharedEr
}

// cluster runs the steps on one cluster until one fails.
func (r *runner) cluster(ctx context.Context, cl Cluster) ClusterResult {
	res := ClusterResult{Cluster: cl.Name()}
	var (
		clusterSt clusterState
		ident     identityState
		shared    sharedState
		kube      kubernetes.Interface
	)
	ns := r.cfg.namespaceOf(cl)
	group := r.cfg.identityGroup(cl)
	idName := r.cfg.IdentityName(cl)
	steps := []step{
		{StepIssuer, func() (bool, string, error) {
			c, err := r.pool.get(cl.id.SubscriptionID)
			if err != nil {
				return false, "", err
			}
			st, changed, err := ensureCluster(ctx, c, cl.id)
			clusterSt = st
			if changed {
				return true, "enabled OIDC issuer and workload identity; issuer " + st.issuerURL, err
			}
			return false, "issuer " + st.issuerURL, err
		}},
		{StepIdentity, func() (bool, string, error) {
			c, err := r.pool.get(cl.id.SubscriptionID)
			if err != nil {
				return false, "", err
			}
			st, changed, err := ensureIdentity(ctx, c, group, idName, clusterSt.location)
			ident = st
			verb := "found"
			if changed {
				verb = "created"
			}
			return changed, fmt.Sprintf("%s identity %s/%s, client id %s", verb, group, idName, st.clientID), err
		}},
		{StepFederation, func() (bool, string, error) {
			c, err := r.pool.get(cl.id.SubscriptionID)
			if err != nil {
				return false, "", err
			}
			name := FederatedCredentialName(ns, r.cfg.ServiceAccount)
			changed, err := ensureFederatedCredential(ctx, c, group, idName, name, clusterSt.issuerURL, r.cfg.Subject(cl), r.cfg.Audience)
			return changed, "federated credential " + name + " for " + r.cfg.Subject(cl), err
		}},
		{StepRole, func() (bool, string, error) {
			var err error
			if shared, err = r.sharedState(ctx); err != nil {
				return false, "", err
			}
			c, err := r.pool.get(r.cfg.KeyVault.id.SubscriptionID)
			if err != nil {
				return false, "", err
			}
			changed, err := ensureRole(ctx, c, r.cfg.KeyVault.ID, shared.roleDefID, ident.principalID)
			return changed, fmt.Sprintf("role %s on vault %s", r.cfg.Role, r.cfg.KeyVault.id.Name), err
		}},
		{StepDeploy, func() (bool, string, error) {
			rc, err := restConfig(cl)
			if err != nil {
				return false, "", err
			}
			if kube, err = kubernetes.NewForConfig(rc); err != nil {
				return false, "", fmt.Errorf("create kubernetes client: %w", err)
			}
			return r.chart.deploy(ctx, deployOptions{cluster: cl, namespace: ns, clientID: ident.clientID, timeout: r.opts.DeployTimeout})
		}},
		{StepVerify, func() (bool, string, error) {
			err := r.verify(ctx, ProbeOptions{
				Kube: kube, Namespace: ns, ServiceAccount: r.cfg.ServiceAccount, Audience: r.cfg.Audience,
				Azure: r.opts.Azure, ClientID: ident.clientID, VaultURI: shared.vaultURI, Secret: r.cfg.KeyVault.VerifySecret,
			})
			if err != nil {
				return false, "", errors.New(probeError(err))
			}
			if r.cfg.KeyVault.VerifySecret == "" {
				return false, "service account token exchanged for the identity", nil
			}
			return false, "service account read secret " + r.cfg.KeyVault.VerifySecret, nil
		}},
	}
	res.Steps = r.runSteps(res.Cluster, steps)
	return res
}

// step is one of a cluster's steps: it reports whether it changed anything and what it found.
type step struct {
	name string
	run  func() (bool, string, error)
}

// runSteps runs the steps in order, reporting each, and stops at the first that fails.
func (r *runner) runSteps(cluster string, steps []step) []StepResult {
	var results []StepResult
	for _, s := range steps {
		changed, detail, err := s.run()
		out := StepResult{Step: s.name, Outcome: Done, Detail: detail}
		if changed {
			out.Outcome = Changed
		}
		if err != nil {
			out = StepResult{Step: s.name, Outcome: Failed, Detail: strings.Join(strings.Fields(err.Error()), " ")}
		}
		results = append(results, out)
		r.progress(cluster, out)
		if err != nil {
			break
		}
	}
	return results
}

// verify probes until it succeeds or VerifyTimeout passes: in Azure a new federated credential
// or role assignment takes a while to apply. A service account the cluster cannot issue a token
// for is not retried: waiting does not make it appear.
func (r *runner) verify(ctx context.Context, o ProbeOptions) error {
	deadline := r.opts.After(r.opts.VerifyTimeout)
	for {
		err := Probe(ctx, o)
		if err == nil || errors.Is(err, ErrServiceAccountToken) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-deadline:
			return err
		case <-r.opts.After(r.opts.RetryInterval):
		}
	}
}

// Plan writes what a run would do on each cluster, without calling Azure or the clusters.
func Plan(w io.Writer, cfg *Config) error {
	for _, cl := range cfg.Clusters {
		ns := cfg.namespaceOf(cl)
		group, name := cfg.identityGroup(cl), cfg.IdentityName(cl)
		release := cfg.App.Release
		if release == "" {
			release = "(chart name)"
		}
		where := "current kubeconfig"
		if cl.Kubeconfig != "" {
			where = cl.Kubeconfig
		}
		if cl.Context != "" {
			where += ", context " + cl.Context
		}
		lines := []string{
			fmt.Sprintf("%s (%s):", cl.Name(), cl.ID),
			fmt.Sprintf("  %-10s enable OIDC issuer and workload identity if off; read the issuer URL", StepIssuer),
			fmt.Sprintf("  %-10s create or reuse identity %s in resource group %s", StepIdentity, name, group),
			fmt.Sprintf("  %-10s federated credential %s: issuer of %s, subject %s, audience %s", StepFederation, FederatedCredentialName(ns, cfg.ServiceAccount), cl.Name(), cfg.Subject(cl), cfg.Audience),
			fmt.Sprintf("  %-10s grant %q on %s to the identity", StepRole, cfg.Role, cfg.KeyVault.ID),
			fmt.Sprintf("  %-10s install or upgrade release %s of %s in namespace %s (%s), %s = the identity's client id", StepDeploy, release, cfg.App.Chart, ns, where, cfg.App.ClientIDValue),
			fmt.Sprintf("  %-10s %s/%s's token exchanged for the identity%s", StepVerify, ns, cfg.ServiceAccount, verifyWhat(cfg)),
		}
		if _, err := fmt.Fprintln(w, strings.Join(lines, "\n")); err != nil {
			return err
		}
	}
	return nil
}

func verifyWhat(cfg *Config) string {
	if cfg.KeyVault.VerifySecret == "" {
		return ""
	}
	return ", then reads secret " + cfg.KeyVault.VerifySecret
}

// RevokeOptions configure Revoke.
type RevokeOptions struct {
	Config  *Config
	Azure   azure.Config
	Cluster string
}

// Revoke removes the named cluster's role assignment on the vault (only that one: the other
// clusters keep theirs). It reports whether there was one to remove. A later rollout of the
// same file grants it again: take the cluster out of the file to keep it revoked.
func Revoke(ctx context.Context, o RevokeOptions) (removed bool, err error) {
	cl, ok := o.Config.Cluster(o.Cluster)
	if !ok {
		names := make([]string, 0, len(o.Config.Clusters))
		for _, c := range o.Config.Clusters {
			names = append(names, c.Name())
		}
		return false, fmt.Errorf("revoke: no cluster %q in the rollout file (it has %s)", o.Cluster, strings.Join(names, ", "))
	}
	r, err := newRunner(Options{Config: o.Config, Azure: o.Azure})
	if err != nil {
		return false, err
	}
	c, err := r.pool.get(cl.id.SubscriptionID)
	if err != nil {
		return false, err
	}
	ident, found, err := readIdentity(ctx, c, o.Config.identityGroup(cl), o.Config.IdentityName(cl))
	if err != nil {
		return false, fmt.Errorf("revoke %s: %w", cl.Name(), err)
	}
	if !found {
		return false, nil
	}
	vc, err := r.pool.get(o.Config.KeyVault.id.SubscriptionID)
	if err != nil {
		return false, err
	}
	roleDefID, err := resolveRole(ctx, vc, o.Config.KeyVault.id, o.Config.Role)
	if err != nil {
		return false, fmt.Errorf("revoke %s: %w", cl.Name(), err)
	}
	removed, err = removeRole(ctx, vc, o.Config.KeyVault.ID, roleDefID, ident.principalID)
	if err != nil {
		return false, fmt.Errorf("revoke %s: %w", cl.Name(), err)
	}
	return removed, nil
}
