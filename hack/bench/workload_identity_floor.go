package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/webhook/registration"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// ceruleanTenant is the tenant every webhook in the bench injects.
const ceruleanTenant = "99999999-8888-7777-6666-555555555555"

// withNoopWebhook runs fn while the floor of any webhook serves: a handler that answers
// allowed with no patch, on exactly the stack Cerulean's runs on (webhooks.New's
// controller-runtime server and certificates, in a manager) and registered with exactly its
// configuration (wi.Configuration: by URL, failurePolicy Fail, the same objectSelector, timeout
// and sideEffects). Whatever a webhook adds beyond this is its own handler's cost.
func withNoopWebhook[T any](ctx context.Context, cp *devenv.ControlPlane, fn func() (T, error)) (T, error) {
	return withFloorWebhook(ctx, cp, func(admission.Request) admission.Response { return admission.Allowed("") }, fn)
}

// withPatchFloorWebhook is the floor of a webhook that mutates as Cerulean's does: the same
// stack and configuration, answering every pod with the patch Cerulean's handler computed for
// the first (the bench's pods are alike). What kube-apiserver does with a patch (apply it,
// decode, validate and store a larger pod) is in it; the handler's own work is not.
func withPatchFloorWebhook[T any](ctx context.Context, cp *devenv.ControlPlane, fn func() (T, error)) (T, error) {
	reader, err := client.New(cp.RESTConfig, client.Options{})
	if err != nil {
		var zero T
		return zero, err
	}
	h := &wi.Handler{Reader: reader, Config: wi.Config{TenantID: ceruleanTenant}}
	var once sync.Once
	var fixed admission.Response
	return withFloorWebhook(ctx, cp, func(req admission.Request) admission.Response {
		once.Do(func() { fixed = answerOf(h, req) })
		return fixed // controller-runtime sets each request's UID
	}, fn)
}

// answerOf is h's answer to req, through its HTTP handler as kube-apiserver reaches it.
func answerOf(h http.Handler, req admission.Request) admission.Response {
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	r := httptest.NewRequest(http.MethodPost, wi.Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &rev); err != nil || rev.Response == nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("the handler answered %d %s", w.Code, w.Body))
	}
	return admission.Response{AdmissionResponse: *rev.Response}
}

// withFloorWebhook runs fn while answer serves on Cerulean's stack and configuration.
func withFloorWebhook[T any](ctx context.Context, cp *devenv.ControlPlane, answer func(admission.Request) admission.Response, fn func() (T, error)) (T, error) {
	var zero T
	w, mgr, port, err := newWebhookManager(cp, wi.Config{})
	if err != nil {
		return zero, err
	}
	var calls atomic.Int64
	mgr.GetWebhookServer().Register(wi.Path, &webhook.Admission{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		calls.Add(1)
		return answer(req)
	})})
	if err := w.Rotator().Ensure(ctx); err != nil {
		return zero, err
	}
	c, err := client.New(cp.RESTConfig, client.Options{})
	if err != nil {
		return zero, err
	}
	cc := registration.ClientConfig{URL: fmt.Sprintf("https://127.0.0.1:%d", port), CABundle: w.Rotator().CABundle()}
	if err := wi.Apply(ctx, c, cc); err != nil {
		return zero, err
	}
	defer deregisterNoop(ctx, cp, &calls)
	defer runManager(ctx, mgr, "no-op webhook manager")()
	if err := waitCalled(ctx, cp, &calls, true); err != nil {
		return zero, fmt.Errorf("the floor webhook: %w", err)
	}
	return fn()
}

// deregisterNoop removes the configuration and waits until kube-apiserver stops calling it.
func deregisterNoop(ctx context.Context, cp *devenv.ControlPlane, calls *atomic.Int64) {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return
	}
	_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, wi.ConfigurationName, metav1.DeleteOptions{})
	_ = waitCalled(ctx, cp, calls, false)
}

// waitCalled waits until a labelled pod's dry-run creation does (called) or does not call the
// no-op webhook.
func waitCalled(ctx context.Context, cp *devenv.ControlPlane, calls *atomic.Int64, called bool) error {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		before := calls.Load()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: map[string]string{wi.UseLabel: "true"}}}
		p.Spec.ServiceAccountName = "app"
		p.Spec.Containers = []corev1.Container{{Name: "probe", Image: "probe"}}
		_, err := cs.CoreV1().Pods(wiNamespace).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && (calls.Load() > before) == called {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("kube-apiserver did not start or stop calling it (called=%v): %w", called, err)
			}
			return fmt.Errorf("kube-apiserver did not start or stop calling it (called=%v)", called)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
