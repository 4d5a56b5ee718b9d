package workloadidentity

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func request(t *testing.T, op admissionv1.Operation, p *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Namespace: "ns", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

// The handler patches only labelled pods at creation, and names a missing service account.
func TestHandle(t *testing.T) {
	h := &Handler{
		Reader:  fake.NewClientBuilder().WithObjects(sa(map[string]string{ClientIDAnnotation: clientID})).Build(),
		Decoder: admission.NewDecoder(scheme.Scheme),
		Config:  cfg,
	}
	labelled := pod(nil, "app")
	labelled.Namespace = "" // a controller's pods: the namespace is the request's

	resp := h.Handle(t.Context(), request(t, admissionv1.Create, labelled))
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("labelled pod: allowed %v, %d patches", resp.Allowed, len(resp.Patches))
	}
	for name, p := range map[string]*corev1.Pod{"unlabelled": func() *corev1.Pod { p := pod(nil, "app"); p.Labels = nil; return p }()} {
		if resp := h.Handle(t.Context(), request(t, admissionv1.Create, p)); !resp.Allowed || len(resp.Patches) != 0 {
			t.Errorf("%s: allowed %v, %d patches", name, resp.Allowed, len(resp.Patches))
		}
	}
	if resp := h.Handle(t.Context(), request(t, admissionv1.Update, labelled)); !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("update: allowed %v, %d patches", resp.Allowed, len(resp.Patches))
	}
	missing := pod(nil, "app")
	missing.Spec.ServiceAccountName = "gone"
	if resp := h.Handle(t.Context(), request(t, admissionv1.Create, missing)); resp.Allowed || resp.Result == nil || resp.Result.Message != "service account ns/gone not found" {
		t.Errorf("missing service account: %+v", resp.Result)
	}
	bad := pod(map[string]string{TokenExpirationAnnotation: "1"}, "app")
	if resp := h.Handle(t.Context(), request(t, admissionv1.Create, bad)); resp.Allowed {
		t.Error("an out-of-bounds expiration was admitted")
	}
}
