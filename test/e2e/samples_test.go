package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/metricstest"
	"github.com/cerulean/cerulean/internal/testenv"
)

// TestUpAppliesSamples: right after `up`, `kubectl apply -f config/samples/` works and every
// sample goes Ready: the manager runs in-process with the CRDs installed. With a node, the
// quickstart (docs/quickstart.md) and the app walkthrough run on it too.
func TestUpAppliesSamples(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	kubeconfig := env["KUBECONFIG"]
	if hasNode(t) {
		// First, as a reader of the docs does right after `make up`.
		t.Run("docs/quickstart.md", func(t *testing.T) { quickstart(t, up, dir) })
	}
	samples, err := filepath.Abs("../../config/samples")
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, kubeconfig, "apply", "-f", samples)
	kinds := "resourcegroups,userassignedidentities,federatedidentitycredentials,roleassignments,vaults,storageaccounts"
	kubectl(t, kubeconfig, "wait", "--for=condition=Ready", "--timeout=3m", kinds, "--all")
	out := kubectl(t, kubeconfig, "get", "azure")
	if strings.Count(out, "True") < 6 || !strings.Contains(out, "SEVERITY") {
		t.Errorf("kubectl get azure:\n%s", out)
	}
	upMetrics(t, env)
	if hasNode(t) {
		appWalkthrough(t, env, dir, filepath.Join(samples, "app"))
	}
	stopAndCheck(t, up, dir, syscall.SIGINT)
}

// upMetrics scrapes the metrics of the manager and node agent up runs, at the URLs DIR/env
// names (docs/operations.md): the manager's ARM requests for the samples are counted.
func upMetrics(t *testing.T, env map[string]string) {
	t.Helper()
	body, err := metricstest.Scrape(strings.TrimSuffix(env["CERULEAN_MANAGER_METRICS_URL"], "/metrics"))
	if err != nil {
		t.Errorf("the manager's metrics at CERULEAN_MANAGER_METRICS_URL: %v", err)
	} else if n := metricstest.Sum(body, "azure_successful_requests_total"); n == 0 {
		t.Errorf("the manager's metrics count no ARM request after the samples went Ready:\n%s", body)
	}
	if !hasNode(t) {
		return
	}
	body, err = metricstest.Scrape(strings.TrimSuffix(env["CERULEAN_NODE_AGENT_METRICS_URL"], "/metrics"))
	if err != nil {
		t.Errorf("the node agent's metrics at CERULEAN_NODE_AGENT_METRICS_URL: %v", err)
	} else if metricstest.Sum(body, "process_cpu_seconds_total") == 0 {
		t.Errorf("the node agent's metrics hold no process series:\n%s", body)
	}
}

// appWalkthrough is docs/walkthrough-app.md as a user runs it: one apply of an app with the
// PostgreSQL server, Redis cache and storage account it uses; its pod waits for their exports,
// starts on its own, and answers a second pod at its Service's DNS name with a row, a key and a
// blob (pgx, go-redis, azblob under workload identity); one delete removes the Azure resources
// and the engines' data.
func appWalkthrough(t *testing.T, env map[string]string, dir, app string) {
	kubeconfig := env["KUBECONFIG"]
	cs := clientset(t, kubeconfig)
	ctx := t.Context()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the shop's pods and Azure resources:\n%s\n%s", kubectlQuiet(t, kubeconfig, "describe", "pods", "-l", "app=shop"), kubectlQuiet(t, kubeconfig, "get", "azure"))
		}
	})
	kubectl(t, kubeconfig, "apply", "-f", app)

	// The pod waits, visibly, for the exports the manager has not written yet.
	var waited string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,reason=Failed"})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		for _, e := range events.Items {
			// `configmap "shop-services" not found`, or `couldn't find key pgDSN in ConfigMap
			// default/shop-services` once another resource's export has created it.
			if strings.HasPrefix(e.InvolvedObject.Name, "shop-") && strings.Contains(e.Message, "Error:") {
				waited = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no event shows the shop's pod waiting for its exports: %v", err)
	} else if !strings.Contains(waited, "shop-") {
		t.Errorf("the pod's waiting event %q does not name a missing export", waited)
	}

	kubectl(t, kubeconfig, "wait", "--for=condition=Available", "deployment/shop", "--timeout=5m")
	out := runToCompletion(t, cs, kubeconfig, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-client"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "client", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: []string{"get", "http://shop.default.svc.cluster.local/"},
		}}},
	})
	for _, want := range []string{"postgres ok row", "redis ok visits", "blob ok visit-"} {
		if !strings.Contains(out, want) {
			t.Errorf("the shop answered %q, want a line %q", out, want)
		}
	}

	engines := func() []string {
		dirs, _ := filepath.Glob(filepath.Join(dir, "cloud", "engines", "*", "*"))
		return dirs
	}
	if len(engines()) < 2 {
		t.Fatalf("engines' data before the delete: %v, want the server's and the cache's", engines())
	}
	kubectl(t, kubeconfig, "delete", "-f", app, "--timeout=5m")
	if left := engines(); len(left) > 0 {
		t.Errorf("after the delete, the engines' data is still there: %v", left)
	}
	groups := resourceGroups(t, env)
	if _, err := groups.Get(ctx, "shop-rg", nil); !isNotFound(err) {
		t.Errorf("after the delete, ARM's GET of the resource group: %v, want 404", err)
	}
	_ = cs.CoreV1().Pods("default").Delete(ctx, "shop-client", metav1.DeleteOptions{})
}

func resourceGroups(t *testing.T, env map[string]string) *armresources.ResourceGroupsClient {
	t.Helper()
	opts := clientOptions(t, env)
	cred, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := armresources.NewResourceGroupsClient(env["AZURE_SUBSCRIPTION_ID"], cred, &arm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return err != nil && errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// kubectlQuiet runs kubectl for a failure's log: its output, or why there is none.
func kubectlQuiet(t *testing.T, kubeconfig string, args ...string) string {
	out, err := exec.Command(binary(t, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return err.Error() + ": " + string(out)
	}
	return string(out)
}

// quickstart runs docs/quickstart.md as a reader runs it: its first ```sh block is `make up`,
// which this test has done (its output is checked against the block's expected output); the
// others run in order in one shell whose directory has the reader's .cerulean (up's data dir)
// and bin/. Each ```text block after a ```sh block is that block's expected output: every line,
// in order, is a line of what the block printed (runs of spaces count as one; `…` matches
// anything), so the page shows what a reader sees.
func quickstart(t *testing.T, up *upProcess, dir string) {
	testenv.Tools(t, "hack/install-test-deps.sh (make test-deps)", "bash", "curl", "jq", "sha256sum")
	steps := docSteps(t, "../../docs/quickstart.md")
	if len(steps) < 5 || strings.TrimSpace(steps[0].script) != "make up" {
		t.Fatalf("docs/quickstart.md: want `make up` first and the steps after it, found %d blocks", len(steps))
	}
	// up prints its summary just after it writes DIR/env (as rollout_test reads it too).
	_ = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(up.output.String(), "Ctrl-C stops everything"), nil
	})
	expectLines(t, "make up", up.output.String(), steps[0].want)

	work := t.TempDir()
	binDir, err := devenv.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{".cerulean": dir, "bin": binDir} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, s := range steps[1:] {
		fmt.Fprintf(&script, "echo %s\n%s\n", stepMarker(i+1), s.script)
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script.String())
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	outputs := splitSteps(string(out), len(steps))
	for i, s := range steps[1:] {
		if i+1 < len(outputs) {
			expectLines(t, s.script, outputs[i+1], s.want)
		}
	}
	if err != nil {
		t.Fatalf("docs/quickstart.md's commands failed: %v\n%s", err, out)
	}
}

// docStep is a ```sh block of a page and the ```text block after it (its expected output).
type docStep struct {
	script string
	want   []string
}

func docSteps(t *testing.T, path string) []docStep {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []docStep
	var fence string
	var cur strings.Builder
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case fence == "" && (line == "```sh" || line == "```text"):
			fence = line
			cur.Reset()
		case fence != "" && line == "```":
			if fence == "```sh" {
				steps = append(steps, docStep{script: cur.String()})
			} else if len(steps) > 0 {
				steps[len(steps)-1].want = strings.Split(strings.TrimSpace(cur.String()), "\n")
			}
			fence = ""
		case fence != "":
			cur.WriteString(line + "\n")
		}
	}
	return steps
}

func stepMarker(i int) string { return fmt.Sprintf("@@quickstart-step-%d@@", i) }

// splitSteps cuts the script's output at the markers: element i is step i's output.
func splitSteps(out string, n int) []string {
	parts := make([]string, n)
	cur := 0
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "@@quickstart-step-") {
			cur++
			continue
		}
		if cur < n {
			parts[cur] += line + "\n"
		}
	}
	return parts
}

// expectLines checks that every line of want matches, in order, a line of out.
func expectLines(t *testing.T, script, out string, want []string) {
	t.Helper()
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	lines := strings.Split(out, "\n")
	next := 0
	for _, w := range want {
		pieces := strings.Split(norm(w), "…")
		for i := range pieces {
			pieces[i] = regexp.QuoteMeta(pieces[i])
		}
		re := regexp.MustCompile("^" + strings.Join(pieces, ".*") + "$")
		found := false
		for next < len(lines) && !found {
			found = re.MatchString(norm(lines[next]))
			next++
		}
		if !found {
			t.Errorf("docs/quickstart.md: the output of\n%s\nhas no line %q (after the lines before it) in:\n%s", script, w, out)
			return
		}
	}
}
