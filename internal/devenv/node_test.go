package devenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/images"
)

const podWait = 2 * time.Minute

// testPod is a pod of the test-app image running one of its tool commands.
func testPod(name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent, Args: args,
			}},
		},
	}
}

// createPod creates the pod in a namespace of its own test and deletes it when the test ends.
func createPod(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	created, err := cs.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	return created
}

// waitPhase waits for the pod to reach one of the phases and returns it.
func waitPhase(t *testing.T, cs kubernetes.Interface, ns, name string, phases ...corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		for _, p := range phases {
			if pod.Status.Phase == p {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s did not reach %v: %v; status %+v", ns, name, phases, err, podStatus(pod))
	}
	return pod
}

func podStatus(pod *corev1.Pod) string {
	if pod == nil {
		return "(none)"
	}
	s := string(pod.Status.Phase)
	for _, c := range pod.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			s += fmt.Sprintf(" %s waiting: %s %s", c.Name, w.Reason, w.Message)
		}
		if term := c.State.Terminated; term != nil {
			s += fmt.Sprintf(" %s terminated: %s %d", c.Name, term.Reason, term.ExitCode)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			s += fmt.Sprintf(" %s=%s %s", c.Type, c.Status, c.Message)
		}
	}
	return s
}

func kubectl(t *testing.T, cp *devenv.ControlPlane, args ...string) string {
	t.Helper()
	bin, err := devenv.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The node is registered as a user would find it: Ready, with the providerID it was given, the
// pod subnet kube-controller-manager allocated, and its InternalIP on the bridge.
func TestNodeIsReadyWithItsProviderIDAndPodSubnet(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	node, err := cs.CoreV1().Nodes().Get(t.Context(), devenv.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.ProviderID != devenvtest.TestProviderID {
		t.Errorf("providerID %q, want %q", node.Spec.ProviderID, devenvtest.TestProviderID)
	}
	if node.Spec.PodCIDR != devenv.NodePodCIDR {
		t.Errorf("podCIDR %q, want %q", node.Spec.PodCIDR, devenv.NodePodCIDR)
	}
	var internal string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = a.Address
		}
	}
	if internal != devenv.NodeIP {
		t.Errorf("InternalIP %q, want %q", internal, devenv.NodeIP)
	}
}

// A Deployment's pod is scheduled (kube-scheduler runs) and runs; a DaemonSet's pod lands on the
// node; `kubectl logs` and `kubectl exec` reach the kubelet through kube-apiserver.
func TestDeploymentAndDaemonSetPodsRunWithLogsAndExec(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	ctx := t.Context()
	labels := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"echo", "hello from the node"},
			}},
		},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AppsV1().Deployments("default").Delete(context.Background(), "web", metav1.DeleteOptions{})
	})
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 1, nil
	})
	if err != nil {
		t.Fatalf("deployment web never had a ready replica: %v", err)
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of web: %v %v", pods, err)
	}
	pod := pods.Items[0]
	if pod.Spec.NodeName != devenv.NodeName || pod.Status.PodIP == "" {
		t.Errorf("pod %s on node %q with IP %q", pod.Name, pod.Spec.NodeName, pod.Status.PodIP)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(kubectl(t, cp, "logs", pod.Name), "hello from the node"), nil
	})
	if err != nil {
		t.Errorf("kubectl logs %s never showed the container's output", pod.Name)
	}
	if out := kubectl(t, cp, "exec", pod.Name, "--", "/usr/local/bin/test-app", "cat", "/etc/hostname"); strings.TrimSpace(out) != pod.Name {
		t.Errorf("kubectl exec cat /etc/hostname: %q, want the pod's name %q", out, pod.Name)
	}

	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "agent", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"sleep"}}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AppsV1().DaemonSets("default").Delete(context.Background(), "agent", metav1.DeleteOptions{})
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && d.Status.DesiredNumberScheduled == 1 && d.Status.NumberReady == 1, nil
	})
	if err != nil {
		t.Fatalf("daemonset agent never had its pod ready on the node: %v", err)
	}
}

// A projected service-account token with Azure's audience appears in the container, verifies
// with the issuer's keys, names the pod and passes a TokenReview.
func TestProjectedServiceAccountTokenInTheContainer(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	pod := testPod("token", "sleep")
	pod.Spec.Volumes = []corev1.Volume{{Name: "azure-identity-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: azureAudience, ExpirationSeconds: ptr.To[int64](600), Path: "azure-identity-token",
		}}},
	}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "azure-identity-token", MountPath: "/var/run/secrets/azure/tokens", ReadOnly: true}}
	created := createPod(t, cs, pod)
	waitPhase(t, cs, "default", "token", corev1.PodRunning)
	read := func() string {
		return strings.TrimSpace(kubectl(t, cp, "exec", "token", "--", "/usr/local/bin/test-app", "cat", "/var/run/secrets/azure/tokens/azure-identity-token"))
	}
	first := read()
	keys := fetchIssuerKeys(t, anonymousClient(cp.CACertPEM), cp.IssuerURL)
	verify := func(raw string) {
		tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
		if err != nil {
			t.Fatalf("the token file holds no JWT: %v", err)
		}
		var claims jwt.Claims
		var k8s struct {
			Kubernetes struct {
				Pod struct {
					Name string `json:"name"`
					UID  string `json:"uid"`
				} `json:"pod"`
			} `json:"kubernetes.io"`
		}
		if err := tok.Claims(keys, &claims, &k8s); err != nil {
			t.Fatalf("the token does not verify with the issuer's keys: %v", err)
		}
		if err := claims.ValidateWithLeeway(jwt.Expected{
			Issuer: cp.IssuerURL, Subject: "system:serviceaccount:default:default", AnyAudience: jwt.Audience{azureAudience}, Time: time.Now(),
		}, time.Minute); err != nil {
			t.Errorf("claims: %v", err)
		}
		if k8s.Kubernetes.Pod.Name != "token" || k8s.Kubernetes.Pod.UID != string(created.UID) {
			t.Errorf("the token is bound to pod %+v, want token/%s", k8s.Kubernetes.Pod, created.UID)
		}
	}
	verify(first)

	review, err := cs.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: first, Audiences: []string{azureAudience}},
	}, metav1.CreateOptions{})
	if err != nil || !review.Status.Authenticated {
		t.Errorf("TokenReview of the projected token: %+v %v", review.Status, err)
	}

	// The kubelet's refresh of this file (at 80% of the lifetime, so after 8 real minutes) is
	// proven once, end to end, by test/e2e's TestWorkloadIdentityFromManifestsUnderUp: a pod
	// keeps reading Key Vault past its first token's expiry.
}

// Secret and ConfigMap volumes carry their data into the container.
func TestSecretAndConfigMapVolumes(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	ctx := t.Context()
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vol-secret"}, StringData: map[string]string{"password": "from-a-secret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Secrets("default").Delete(context.Background(), "vol-secret", metav1.DeleteOptions{})
	})
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vol-config"}, Data: map[string]string{"setting": "from-a-configmap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps("default").Delete(context.Background(), "vol-config", metav1.DeleteOptions{})
	})
	pod := testPod("volumes", "cat", "/secret/password", "/config/setting")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
		{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-config"}}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/secret"}, {Name: "c", MountPath: "/config"}}
	createPod(t, cs, pod)
	got := waitPhase(t, cs, "default", "volumes", corev1.PodSucceeded, corev1.PodFailed)
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod volumes: %s\n%s", podStatus(got), kubectl(t, cp, "logs", "volumes"))
	}
	if out := kubectl(t, cp, "logs", "volumes"); out != "from-a-secretfrom-a-configmap" {
		t.Errorf("the container read %q, want the Secret's and the ConfigMap's values", out)
	}
}

// Two pods reach each other by pod IP, and the server sees the client's pod IP (no NAT).
func TestPodsReachEachOtherByPodIP(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	createPod(t, cs, testPod("server", "serve", ":8080"))
	server := waitPhase(t, cs, "default", "server", corev1.PodRunning)
	client := testPod("client", "get", "http://"+net.JoinHostPort(server.Status.PodIP, "8080")+"/")
	createPod(t, cs, client)
	got := waitPhase(t, cs, "default", "client", corev1.PodSucceeded, corev1.PodFailed)
	out := kubectl(t, cp, "logs", "client")
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("client could not reach the server at %s: %s\n%s", server.Status.PodIP, podStatus(got), out)
	}
	if want := "remote " + got.Status.PodIP + ":"; !strings.HasPrefix(out, want) {
		t.Errorf("server saw %q, want the client's pod IP (%s)", out, want)
	}
}

// A pod's call to the instance metadata address can be redirected on the host by an iptables
// rule to a listener on the node's address, which sees the pod's IP: pod identity's path.
func TestMetadataAddressRedirectedOnTheHost(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	l, err := net.Listen("tcp", net.JoinHostPort(devenv.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var callers []string
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		callers = append(callers, r.RemoteAddr)
		mu.Unlock()
		_, _ = io.WriteString(w, "metadata for "+r.URL.Path)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	rule := []string{"-t", "nat", "PREROUTING", "-i", devenv.Bridge, "-d", "169.254.169.254/32", "-p", "tcp", "--dport", "80",
		"-j", "DNAT", "--to-destination", devenv.NodeIP + ":" + port}
	iptables := func(op string) error {
		args := append([]string{"-w", "5", rule[0], rule[1], op}, rule[2:]...)
		out, err := exec.Command("iptables", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := iptables("-A"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := iptables("-D"); err != nil {
			t.Error(err)
		}
	})
	createPod(t, cs, testPod("imds", "get", "http://169.254.169.254/metadata/identity/oauth2/token"))
	got := waitPhase(t, cs, "default", "imds", corev1.PodSucceeded, corev1.PodFailed)
	out := kubectl(t, cp, "logs", "imds")
	if got.Status.Phase != corev1.PodSucceeded || out != "metadata for /metadata/identity/oauth2/token" {
		t.Fatalf("pod's call to 169.254.169.254: %s, output %q", podStatus(got), out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(callers) != 1 || !strings.HasPrefix(callers[0], got.Status.PodIP+":") {
		t.Errorf("the listener saw callers %v, want the pod's IP %s", callers, got.Status.PodIP)
	}
}

// Nothing is pulled: a pod naming an image the node does not have fails to pull at once, and a
// second node on the same machine is refused while this one runs.
func TestNodePullsNothingAndRunsAlone(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	pod := testPod("nopull", "sleep")
	pod.Spec.Containers[0].Image = images.Registry + "/not-imported:v1"
	createPod(t, cs, pod)
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "nopull", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil //nolint:nilerr // retried
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff"), nil
	})
	if err != nil {
		t.Errorf("a pod with an image the node lacks never reported ErrImagePull: %v", err)
	}

	other, err := devenv.Start(t.Context(), devenv.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	_, err = other.StartNode(t.Context(), devenv.NodeOptions{})
	if !errors.Is(err, devenv.ErrNodeInUse) {
		t.Errorf("a second node on this machine: %v, want ErrNodeInUse", err)
	}
}

// Without root, or without the programs `make node` provides, the node refuses to start with an
// error that says what to do.
func TestCheckNodeHostSaysWhatIsMissing(t *testing.T) {
	err := devenv.CheckNodeHost(t.TempDir())
	if os.Geteuid() != 0 {
		if !errors.Is(err, devenv.ErrNeedsRoot) {
			t.Errorf("not root: %v, want ErrNeedsRoot", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "make node") || !strings.Contains(err.Error(), "kubelet") {
		t.Errorf("empty bin dir: %v, want an error naming kubelet and `make node`", err)
	}
}

// In-cluster clients reach kube-apiserver as in any cluster, at the kubernetes Service's
// ClusterIP, verifying its certificate with the service account's CA: from the pod network and
// from the host's (host-network pods such as the node agent).
func TestPodsReachKubeAPIServerThroughItsService(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	for _, hostNetwork := range []bool{false, true} {
		name := "apiserver-" + map[bool]string{false: "pod", true: "host"}[hostNetwork]
		pod := testPod(name, "get", "https://"+devenv.APIServerServiceIP+"/version")
		pod.Spec.HostNetwork = hostNetwork
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SSL_CERT_FILE", Value: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"}}
		createPod(t, cs, pod)
		got := waitPhase(t, cs, "default", name, corev1.PodSucceeded, corev1.PodFailed)
		out := kubectl(t, cp, "logs", name)
		if got.Status.Phase != corev1.PodSucceeded || !strings.Contains(out, `"gitVersion"`) {
			t.Errorf("%s: GET https://%s/version: %s, output %q", name, devenv.APIServerServiceIP, podStatus(got), out)
		}
	}
}
