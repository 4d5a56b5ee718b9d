// Package e2e tests the whole system through `bin/cerulean-local up`, as a user runs it.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
	cerup "github.com/cerulean/cerulean/internal/up"
)

// TestUpServesAndStopsCleanly: `up` writes DIR/env last, kubectl answers with DIR/kubeconfig, and
// Ctrl-C (SIGINT) leaves no control-plane process behind; a second `up` resumes the same cluster.
func TestUpServesAndStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	kubeconfig := env["KUBECONFIG"]
	if kubeconfig != filepath.Join(dir, "kubeconfig") {
		t.Errorf("KUBECONFIG=%q, want the absolute %q", kubeconfig, filepath.Join(dir, "kubeconfig"))
	}
	if fi, err := os.Stat(filepath.Join(dir, "env")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("env file mode: %v %v, want 0600", fi.Mode().Perm(), err)
	}
	kubectl(t, kubeconfig, "create", "configmap", "survives-restart", "--from-literal=k=v")
	if out := kubectl(t, kubeconfig, "get", "ns", "-o", "name"); !strings.Contains(out, "namespace/default") {
		t.Errorf("kubectl get ns: %q", out)
	}
	server := kubectl(t, kubeconfig, "config", "view", "-o", "jsonpath={.clusters[0].cluster.server}")
	requestCloudToken(t, env)
	checkProxyEnv(t, dir, env)
	checkCSIProvider(t, dir, env)

	stopAndCheck(t, up, dir, syscall.SIGINT)
	for _, f := range []string{"env", "proxy.env", filepath.Join(cerup.CSIProvidersDir, "azure.sock")} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still present after up stopped: %v", f, err)
		}
	}

	again := startUp(t, dir)
	resumed := waitForEnv(t, again, dir)
	if resumed["AZURE_TENANT_ID"] != env["AZURE_TENANT_ID"] || resumed["AZURE_CLIENT_ID"] != env["AZURE_CLIENT_ID"] {
		t.Errorf("the local cloud did not resume: tenant/client %s/%s, then %s/%s",
			env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], resumed["AZURE_TENANT_ID"], resumed["AZURE_CLIENT_ID"])
	}
	requestCloudToken(t, resumed)
	if got := kubectl(t, kubeconfig, "config", "view", "-o", "jsonpath={.clusters[0].cluster.server}"); got != server {
		t.Errorf("resumed on %q, first run served %q", got, server)
	}
	kubectl(t, kubeconfig, "get", "configmap", "survives-restart")
	stopAndCheck(t, again, dir, syscall.SIGINT)
}

// checkProxyEnv: DIR/proxy.env (0600) names the proxy, the CA and the bootstrap principal of
// DIR/env, and no endpoint override.
func checkProxyEnv(t *testing.T, dir string, env map[string]string) {
	t.Helper()
	path := filepath.Join(dir, "proxy.env")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read proxy.env: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("proxy.env mode: %v %v, want 0600", fi, err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, value, _ := strings.Cut(strings.TrimPrefix(l, "export "), "=")
		got[name] = value
	}
	if !strings.HasPrefix(got["HTTPS_PROXY"], "http://127.0.0.1:") || got["SSL_CERT_FILE"] != env["SSL_CERT_FILE"] ||
		got["AZURE_CLIENT_ID"] != env["AZURE_CLIENT_ID"] || got["AZURE_TENANT_ID"] != env["AZURE_TENANT_ID"] || got["KUBECONFIG"] != env["KUBECONFIG"] {
		t.Errorf("proxy.env: %q", b)
	}
	for _, name := range []string{"AZURE_AUTHORITY_HOST", "AZURE_RESOURCE_MANAGER_ENDPOINT"} {
		if _, ok := got[name]; ok {
			t.Errorf("proxy.env overrides %s", name)
		}
	}
}

// TestUpKilledLeavesNoChildren: even a SIGKILL of `up` takes its children down (Pdeathsig). As
// root, what the dead node left (running containers and their shims, mounts, the bridge, iptables
// rules, changed sysctls) is cleaned up by the next `up`, which runs the pod again, and a Ctrl-C
// of that one leaves nothing of the node on the machine.
func TestUpKilledLeavesNoChildren(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	if len(childrenOf(dir)) == 0 {
		t.Fatal("found no control-plane processes for the data directory; the check below would prove nothing")
	}
	node := hasNode(t)
	var cs kubernetes.Interface
	var before map[string]string
	if node {
		// What up found under the node lock: read here, a package's node could change them
		// between this test reading them itself and up taking the lock.
		var err error
		if before, err = devenv.RecordedSysctls(); err != nil || len(before) == 0 {
			t.Fatalf("the node's record of the sysctls it found: %v, %v", before, err)
		}
		cs = clientset(t, env["KUBECONFIG"])
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "survivor"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"sleep"},
			}}},
		}
		if _, err := cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, cs, "survivor", time.Time{})
	}
	stopAndCheck(t, up, dir, syscall.SIGKILL)
	if !node {
		return
	}
	left := devenv.NodeLeftovers(dir)
	if len(left) == 0 {
		t.Fatal("the killed node left nothing behind; the cleanup checked below would prove nothing")
	}
	// The dead agent's metadata DNAT is the node's to undo: left, it sends the next node's pods
	// to a port nothing listens on.
	if !slices.ContainsFunc(left, func(s string) bool { return strings.Contains(s, nodeagent.DefaultTable) }) {
		t.Errorf("the killed node's leftovers %v do not name the node agent's nftables table", left)
	}
	// A killed up cannot remove its env file; the next up does, but not before this test would
	// read it as the new one's readiness.
	if err := os.Remove(filepath.Join(dir, "env")); err != nil {
		t.Fatal(err)
	}

	resumed := time.Now().Truncate(time.Second) // startedAt has whole seconds
	again := startUp(t, dir)
	waitForEnv(t, again, dir)
	waitRunning(t, cs, "survivor", resumed)
	stopAndCheck(t, again, dir, syscall.SIGINT)
	if left := devenv.NodeLeftovers(dir); len(left) > 0 {
		t.Errorf("after a Ctrl-C of up, the node left behind: %v", left)
	}
	var after map[string]string
	if err := devenv.WithNodeLock(t.Context(), 10*time.Minute, func() { after = readSysctls(t) }); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		t.Errorf("sysctls before up %v, after %v", before, after)
	}
}

// waitRunning waits for the pod to be Running with a ready container started at or after since
// (a container killed with its node is started again by the next kubelet).
func waitRunning(t *testing.T, cs kubernetes.Interface, name string, since time.Time) {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) == 0 {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		c := pod.Status.ContainerStatuses[0]
		return c.Ready && c.State.Running != nil && !c.State.Running.StartedAt.Time.Before(since), nil
	})
	if err != nil {
		t.Fatalf("pod %s not running (started since %v): %v; %+v", name, since, err, pod)
	}
}

func readSysctls(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range devenv.NodeSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(k, ".", "/")))
		if err != nil {
			t.Fatal(err)
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out
}

func TestUpRefusesASecondInstance(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--no-node")
	waitForEnv(t, up, dir)
	out, err := exec.Command(binary(t, "cerulean-local"), "up", "--data-dir", dir, "--cloud-addr", "127.0.0.1:0", "--proxy-addr", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use") {
		t.Errorf("second up on the same directory: err=%v output=%q, want an 'in use' error", err, out)
	}
	stopAndCheck(t, up, dir, syscall.SIGINT)
}

type upProcess struct {
	cmd    *exec.Cmd
	output *lockedBuffer
	done   chan struct{} // closed when up has exited
	err    error         // up's exit status, valid once done is closed
}

// lockedBuffer is up's output, read by tests while up still writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startUp runs `cerulean-local up` on dir with a free cloud port; as root it runs the local node too,
// waiting for another test package's node to stop (one node runs on a machine at a time).
func startUp(t *testing.T, dir string, args ...string) *upProcess {
	t.Helper()
	p := &upProcess{output: &lockedBuffer{}, done: make(chan struct{})}
	args = append([]string{"up", "--data-dir", dir, "--cloud-addr", "127.0.0.1:0", "--proxy-addr", "0", "--node-wait", "20m"}, args...)
	p.cmd = exec.Command(binary(t, "cerulean-local"), args...)
	p.cmd.Stdout = p.output
	p.cmd.Stderr = p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start up: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		// A test that failed half-way leaves the node of the up it killed: undo it now, not at
		// the next node's start, so that the temporary directory can go and nothing is left.
		if err := devenv.CleanupStaleNode(context.Background()); err != nil {
			t.Errorf("clean up the node: %v", err)
		}
		if t.Failed() {
			t.Logf("cerulean-local up output:\n%s", p.output)
			if b, err := os.ReadFile(filepath.Join(dir, "logs", "cloud.log")); err == nil {
				t.Logf("the local cloud's log:\n%s", b)
			}
		}
	})
	return p
}

// waitForEnv waits for DIR/env, the readiness signal, and parses its export lines.
func waitForEnv(t *testing.T, up *upProcess, dir string) map[string]string {
	t.Helper()
	path := filepath.Join(dir, "env")
	var b []byte
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 25*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-up.done:
			return false, errors.Join(errors.New("up exited before it was ready"), up.err)
		default:
		}
		var err error
		b, err = os.ReadFile(path)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("wait for %s: %v\n%s", path, err, up.output)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		name, value, ok2 := strings.Cut(line, "=")
		if !ok || !ok2 {
			t.Fatalf("env line %q is not `export NAME=VALUE`", sc.Text())
		}
		env[name] = value
	}
	return env
}

func stopAndCheck(t *testing.T, up *upProcess, dir string, sig syscall.Signal) {
	t.Helper()
	if err := up.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal up: %v", err)
	}
	select {
	case <-up.done:
	case <-time.After(time.Minute):
		t.Fatalf("up did not exit within a minute of %v", sig)
	}
	if sig == syscall.SIGINT && up.err != nil {
		t.Errorf("up exited with %v after Ctrl-C, want a clean exit", up.err)
	}
	// After a SIGKILL the kernel delivers the children's death signal asynchronously.
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(childrenOf(dir)) == 0, nil
	})
	if err != nil {
		t.Fatalf("processes left behind after %v: %v", sig, childrenOf(dir))
	}
	// A clean stop also takes down everything of the node (a SIGKILL leaves it to the next up).
	if sig == syscall.SIGINT {
		if left := devenv.NodeLeftovers(dir); len(left) > 0 {
			t.Errorf("the node left behind after %v: %v", sig, left)
		}
	}
}

// childrenOf lists live processes of the control plane and the node that use dir.
func childrenOf(dir string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		name := filepath.Base(argv[0])
		switch name {
		case "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "containerd":
		default:
			continue
		}
		if status, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status")); err == nil && isZombie(status) {
			continue
		}
		found = append(found, filepath.Dir(p)+" "+name)
	}
	return found
}

// isZombie reads /proc/PID/status: a zombie has exited and holds nothing, once its last thread
// is gone (a killed process's main thread is a zombie while the others still release its ports).
func isZombie(status []byte) bool {
	var zombie, oneThread bool
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "State":
			zombie = strings.HasPrefix(strings.TrimSpace(v), "Z")
		case "Threads":
			oneThread = strings.TrimSpace(v) == "1"
		}
	}
	return zombie && oneThread
}

// requestCloudToken uses DIR/env the way a user's program does: the real azidentity client with
// the bootstrap service principal's secret, trusting SSL_CERT_FILE.
func requestCloudToken(t *testing.T, env map[string]string) {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: clientOptions(t, env), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatalf("credential: %v", err)
	}
	if _, err := cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{armScope(env)}}); err != nil {
		t.Fatalf("token from the local cloud with DIR/env's credentials: %v", err)
	}
}

// clientOptions point an Azure SDK client at the cloud DIR/env describes, the way Cerulean's
// components do (internal/azure).
func clientOptions(t *testing.T, env map[string]string) azcore.ClientOptions {
	t.Helper()
	opts, err := azure.ConfigFromEnv(func(name string) string { return env[name] }).ClientOptions()
	if err != nil {
		t.Fatalf("client options from DIR/env: %v", err)
	}
	return opts
}

func armScope(env map[string]string) string {
	return strings.TrimSuffix(env["AZURE_RESOURCE_MANAGER_AUDIENCE"], "/") + "/.default"
}

func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary(t, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func binary(t *testing.T, name string) string {
	t.Helper()
	dir, err := devenv.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v (run `make build tools` first; `make test` does)", path, err)
	}
	return path
}

func TestUpNamesATakenCloudPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	out, err := exec.Command(binary(t, "cerulean-local"), "up", "--no-node", "--data-dir", dir, "--cloud-addr", l.Addr().String(), "--proxy-addr", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), l.Addr().String()) || !strings.Contains(string(out), "--cloud-addr") {
		t.Errorf("up with its cloud port taken: err=%v output=%q, want an error naming the address and --cloud-addr", err, out)
	}
	if left := childrenOf(dir); len(left) != 0 {
		t.Errorf("a failed up left processes behind: %v", left)
	}
}
