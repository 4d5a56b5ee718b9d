package e2e

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
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

	"github.com/cerulean/cerulean/internal/images"
)

// TestUpAppliesSamples: right after `up`, `kubectl apply -f config/samples/` works and every
// sample goes Ready: the manager runs in-process with the CRDs installed. With a node, the app
// walkthrough runs on it too.
func TestUpAppliesSamples(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	kubeconfig := env["KUBECONFIG"]
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
	if hasNode(t) {
		appWalkthrough(t, env, dir, filepath.Join(samples, "app"))
	}
	stopAndCheck(t, up, dir, syscall.SIGINT)
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
