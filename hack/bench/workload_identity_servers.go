package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/webhook/registration"
	"github.com/cerulean/cerulean/internal/webhook/webhooks"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// ceruleanTenant is the tenant every webhook in the bench injects.
const ceruleanTenant = "99999999-8888-7777-6666-555555555555"

// Every webhook in the section runs as a process of its own, as upstream's does: the bench
// binary runs itself with benchWebhookEnv naming what to serve, so that the load generator's
// CPU and garbage collection are not in any webhook's latency and each webhook's CPU time can
// be read from /proc.
const (
	benchWebhookEnv     = "CERULEAN_BENCH_WEBHOOK"      // one of the webhook* kinds below
	benchWebhookPortEnv = "CERULEAN_BENCH_WEBHOOK_PORT" // the loopback port to serve on
	// benchWebhookProfileEnv, set when the bench starts, names a directory where each webhook
	// process the bench serves writes its CPU profile (KIND-PID.pprof): the webhook's own path
	// under kube-apiserver's load.
	benchWebhookProfileEnv = "CERULEAN_BENCH_WEBHOOK_PROFILES"
)

// The webhooks the bench serves from its own binary, all on Cerulean's server stack
// (webhooks.New's controller-runtime server and certificates, in a manager) and registered with
// exactly its configuration (wi.Configuration: by URL, failurePolicy Fail, the same
// objectSelector, timeout and sideEffects).
const (
	// webhookNoop is the floor of any webhook: it reads the review, takes its UID and answers
	// allowed, no patch. Whatever a webhook adds beyond it is its own handler's cost.
	webhookNoop = "noop"
	// webhookLabelFloor is the floor of any webhook that patches: every pod gets one label. A
	// patch of any size has kube-apiserver apply it, decode the pod again and re-run its own
	// mutating admission plugins (k8s.io/apiserver does so whenever a webhook changed the
	// object); this floor measures that part alone, without a larger pod to store.
	webhookLabelFloor = "label-floor"
	// webhookPatchFloor is the floor of a webhook that mutates as Cerulean's does: every pod
	// gets the patch Cerulean's handler computed for the first (the bench's pods are alike).
	// What kube-apiserver does with this patch (the label floor's work, and a larger pod to
	// store) is in it; the handler's own work is not.
	webhookPatchFloor = "patch-floor"
	// webhookCerulean is Cerulean's webhook as `cerulean manager` sets it up.
	webhookCerulean = "cerulean"
)

// benchWebhookMutates is what each webhook the bench serves does to a labelled pod.
var benchWebhookMutates = map[string]mutation{
	webhookNoop:       mutatesNothing,
	webhookLabelFloor: mutatesOneLabel,
	webhookPatchFloor: mutatesForWorkloadIdentity,
	webhookCerulean:   mutatesForWorkloadIdentity,
}

// serveBenchWebhook is the child process: it serves kind until SIGTERM. The parent registers
// nothing: the child does, as the manager does.
func serveBenchWebhook(kind string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(os.Getenv(benchWebhookPortEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", benchWebhookPortEnv, err)
	}
	if dir := os.Getenv(benchWebhookProfileEnv); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", kind, os.Getpid()))) //nolint:gosec // the directory the bench's operator named
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	w, mgr, err := newWebhookManager(cfg, port, wi.Config{TenantID: ceruleanTenant})
	if err != nil {
		return err
	}
	var floor floorHandler
	switch kind {
	case webhookCerulean:
		if err := w.Setup(ctx, mgr); err != nil {
			return err
		}
		return mgr.Start(ctx)
	case webhookNoop:
		floor = noopFloor()
	case webhookLabelFloor:
		floor = labelFloor()
	case webhookPatchFloor:
		reader, err := client.New(cfg, client.Options{})
		if err != nil {
			return err
		}
		floor = patchFloor(&wi.Handler{Reader: reader, Config: wi.Config{TenantID: ceruleanTenant}})
	default:
		return fmt.Errorf("%s=%q: not a webhook the bench serves", benchWebhookEnv, kind)
	}
	mgr.GetWebhookServer().Register(wi.Path, floor)
	if err := w.Rotator().Ensure(ctx); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	cc := registration.ClientConfig{URL: fmt.Sprintf("https://127.0.0.1:%d", port), CABundle: w.Rotator().CABundle()}
	if err := wi.Apply(ctx, c, cc); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// newWebhookManager is a manager serving webhooks.New's server (its certificates, on loopback
// port), Cerulean's webhook stack, configured with cfg.
func newWebhookManager(rc *rest.Config, port int, cfg wi.Config) (*webhooks.Webhooks, ctrl.Manager, error) {
	w, err := webhooks.New(rc, webhooks.Options{Namespace: wiNamespace, Host: "127.0.0.1", Port: port, WorkloadIdentity: cfg})
	if err != nil {
		return nil, nil, err
	}
	ctrl.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(rc, ctrl.Options{WebhookServer: w.Server(), Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard()})
	if err != nil {
		return nil, nil, err
	}
	return w, mgr, nil
}

// floorHandler is the least a webhook can do on Cerulean's server: read the review, take its
// UID and answer with a response fixed in advance.
type floorHandler struct {
	// fixed is the answer, given the first review's body.
	fixed func(body []byte) (admissionv1.AdmissionResponse, error)
}

func (f floorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var rev struct {
		APIVersion string `json:"apiVersion"`
		Request    struct {
			UID types.UID `json:"uid"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &rev); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := f.fixed(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp.UID = rev.Request.UID
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: rev.APIVersion, Kind: "AdmissionReview"}, Response: &resp})
}

func noopFloor() floorHandler {
	return floorHandler{fixed: func([]byte) (admissionv1.AdmissionResponse, error) {
		return admissionv1.AdmissionResponse{Allowed: true}, nil
	}}
}

// labelFloorKey is the label the one-label patch floor adds to every pod.
const labelFloorKey = "cerulean-bench-floor"

func labelFloor() floorHandler {
	patch := []byte(`[{"op":"add","path":"/metadata/labels/` + labelFloorKey + `","value":"seen"}]`)
	patchType := admissionv1.PatchTypeJSONPatch
	return floorHandler{fixed: func([]byte) (admissionv1.AdmissionResponse, error) {
		return admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &patchType}, nil
	}}
}

// patchFloor answers every review with h's answer to the first.
func patchFloor(h http.Handler) floorHandler {
	var once sync.Once
	var patched admissionv1.AdmissionResponse
	var err error
	return floorHandler{fixed: func(body []byte) (admissionv1.AdmissionResponse, error) {
		once.Do(func() { patched, err = answerOf(h, body) })
		return patched, err
	}}
}

// answerOf is h's answer to the review body, through its HTTP handler as kube-apiserver reaches it.
func answerOf(h http.Handler, body []byte) (admissionv1.AdmissionResponse, error) {
	r := httptest.NewRequest(http.MethodPost, wi.Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &rev); err != nil || rev.Response == nil {
		return admissionv1.AdmissionResponse{}, fmt.Errorf("the handler answered %d %s", w.Code, w.Body)
	}
	return *rev.Response, nil
}

// withBenchWebhook runs fn(pid) while the bench's own binary serves kind as process pid.
func withBenchWebhook[T any](ctx context.Context, cp *devenv.ControlPlane, dir, kind string, fn func(pid int) (T, error)) (T, error) {
	var zero T
	self, err := os.Executable()
	if err != nil {
		return zero, err
	}
	port, err := freePort()
	if err != nil {
		return zero, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), benchWebhookEnv+"="+kind, benchWebhookPortEnv+"="+strconv.Itoa(port), "KUBECONFIG="+cp.Kubeconfig)
	return withWebhookProcess(ctx, cp, cmd, filepath.Join(dir, kind+"-webhook.log"), benchWebhookMutates[kind], fn)
}

// withWebhookProcess starts cmd (a webhook that registers itself, or that the caller registered),
// waits until kube-apiserver calls it and checks that it mutates pods as want says, runs fn(its
// pid), then deregisters and stops it. Its output goes to logPath.
func withWebhookProcess[T any](ctx context.Context, cp *devenv.ControlPlane, cmd *exec.Cmd, logPath string, want mutation, fn func(pid int) (T, error)) (T, error) {
	var zero T
	logFile, err := os.Create(logPath)
	if err != nil {
		return zero, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return zero, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return zero, err
	}
	if err := waitCalls(ctx, cs, true); err != nil {
		return zero, fmt.Errorf("%w (its log: %s)", err, logPath)
	}
	defer deregister(ctx, cs)
	if pod, err := probe(ctx, cs); err != nil {
		return zero, err
	} else if got := mutationOf(pod); got != want {
		return zero, fmt.Errorf("the webhook's change to a pod: %s, want %s (its log: %s)", got, want, logPath)
	}
	return fn(cmd.Process.Pid)
}

// deregister removes the configuration and waits until kube-apiserver stops calling it.
func deregister(ctx context.Context, cs *kubernetes.Clientset) {
	_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, wi.ConfigurationName, metav1.DeleteOptions{})
	_ = waitCalls(ctx, cs, false)
}

// waitCalls waits until a labelled pod's dry-run creation does (called) or does not call the
// workload identity webhook, as kube-apiserver counts its calls: kube-apiserver picks up a
// configuration through a watch, and only its metrics tell whether a no-op answer was asked for.
func waitCalls(ctx context.Context, cs *kubernetes.Clientset, called bool) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := probeCalls(ctx, cs, called)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver did not start or stop calling the webhook (called=%v): %w", called, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var errNotYet = errors.New("not yet")

func probeCalls(ctx context.Context, cs *kubernetes.Clientset, called bool) error {
	before, err := webhookCalls(ctx, cs.CoreV1().RESTClient())
	if err != nil {
		return err
	}
	if _, err := probe(ctx, cs); err != nil {
		return err
	}
	after, err := webhookCalls(ctx, cs.CoreV1().RESTClient())
	if err != nil {
		return err
	}
	if (after > before) != called {
		return errNotYet
	}
	return nil
}

// probe is a labelled pod of the annotated service account as kube-apiserver would create it
// (a dry run).
func probe(ctx context.Context, cs *kubernetes.Clientset) (*corev1.Pod, error) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: map[string]string{wi.UseLabel: "true"}}}
	p.Spec.ServiceAccountName = "app"
	p.Spec.Containers = []corev1.Container{{Name: "probe", Image: "probe"}}
	return cs.CoreV1().Pods(wiNamespace).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// mutation is what a webhook did to a labelled pod, checked before the bench measures it.
type mutation string

const (
	mutatesNothing             mutation = "none"
	mutatesOneLabel            mutation = "the floor's one label"
	mutatesForWorkloadIdentity mutation = "workload identity's"
)

// mutationOf tells the workload identity mutation (the client ID's variable) and the label
// floor's label apart from no change.
func mutationOf(pod *corev1.Pod) mutation {
	switch {
	case slices.ContainsFunc(pod.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == wi.ClientIDEnv }):
		return mutatesForWorkloadIdentity
	case pod.Labels[labelFloorKey] != "":
		return mutatesOneLabel
	}
	return mutatesNothing
}

// webhookCalls is how many times kube-apiserver has called the workload identity webhook.
func webhookCalls(ctx context.Context, rc rest.Interface) (float64, error) {
	b, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read kube-apiserver's metrics: %w", err)
	}
	return callsIn(string(b), wi.WebhookName)
}

// callsIn sums webhook's apiserver_admission_webhook_request_total series (one per operation,
// code and outcome) in kube-apiserver's metrics text.
func callsIn(metrics, webhook string) (float64, error) {
	var n float64
	for line := range strings.SplitSeq(metrics, "\n") {
		if !strings.HasPrefix(line, "apiserver_admission_webhook_request_total{") || !strings.Contains(line, `name="`+webhook+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("kube-apiserver's metrics: %q: %w", line, err)
		}
		n += v
	}
	return n, nil
}
