package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// The bench waits on kube-apiserver's count of one webhook's calls, whatever their outcome.
func TestCallsInSumsTheWebhooksSeriesOnly(t *testing.T) {
	metrics := `# HELP apiserver_admission_webhook_request_total [ALPHA] Admission webhook request total
# TYPE apiserver_admission_webhook_request_total counter
apiserver_admission_webhook_request_total{code="200",name="pods.example",operation="CREATE",rejected="false",type="admit"} 7
apiserver_admission_webhook_request_total{code="0",name="pods.example",operation="CREATE",rejected="true",type="admit"} 2
apiserver_admission_webhook_request_total{code="200",name="other.example",operation="CREATE",rejected="false",type="admit"} 40
apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="pods.example",operation="CREATE",rejection_code="0",type="admit"} 2
`
	got, err := callsIn(metrics, "pods.example")
	if err != nil || got != 9 {
		t.Fatalf("callsIn = %v, %v; want 9", got, err)
	}
	if _, err := callsIn(`apiserver_admission_webhook_request_total{name="pods.example"} x`, "pods.example"); err == nil {
		t.Fatal("an unreadable value was taken as a count")
	}
}

// The patch floor answers every review with the patch Cerulean's handler gave the first, under
// each review's own UID and version: kube-apiserver refuses an answer to another UID.
func TestPatchFloorAnswersEachReviewWithCeruleansPatch(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app",
		Annotations: map[string]string{wi.ClientIDAnnotation: "11111111-2222-3333-4444-555555555555"}}}
	h := &wi.Handler{Reader: fake.NewClientBuilder().WithObjects(sa).Build(), Config: wi.Config{TenantID: ceruleanTenant}}
	floor := patchFloor(h)
	review := func(apiVersion, uid string) []byte {
		_, body := labelledPodReview(t, apiVersion, uid)
		return body
	}
	want, err := answerOf(h, review("admission.k8s.io/v1", "first"))
	if err != nil || len(want.Patch) == 0 {
		t.Fatalf("Cerulean's handler: %+v, %v; want a patch", want, err)
	}
	for _, c := range []struct{ apiVersion, uid string }{{"admission.k8s.io/v1", "a"}, {"admission.k8s.io/v1beta1", "b"}} {
		r := httptest.NewRequest(http.MethodPost, wi.Path, bytes.NewReader(review(c.apiVersion, c.uid)))
		w := httptest.NewRecorder()
		floor.ServeHTTP(w, r)
		var got admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Response == nil {
			t.Fatalf("%s: answered %d %s", c.uid, w.Code, w.Body)
		}
		if got.APIVersion != c.apiVersion || string(got.Response.UID) != "uid-"+c.uid || !got.Response.Allowed || !bytes.Equal(got.Response.Patch, want.Patch) {
			t.Errorf("%s: answered %s %+v, want %s, its UID and Cerulean's patch %s", c.uid, got.APIVersion, got.Response, c.apiVersion, want.Patch)
		}
	}
}

// Each floor's answer, applied as kube-apiserver applies a patch, changes a pod as the bench
// checks before it measures the floor: the one-label floor by its label alone.
func TestFloorsChangeAPodAsTheBenchExpects(t *testing.T) {
	raw, body := labelledPodReview(t, "admission.k8s.io/v1", "first")
	for _, c := range []struct {
		name  string
		floor floorHandler
		want  mutation
	}{{webhookNoop, noopFloor(), mutatesNothing}, {webhookLabelFloor, labelFloor(), mutatesOneLabel}} {
		resp, err := answerOf(c.floor, body)
		if err != nil || !resp.Allowed {
			t.Fatalf("%s: %+v, %v", c.name, resp, err)
		}
		patched := raw
		if len(resp.Patch) > 0 {
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if patched, err = patch.Apply(raw); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		var got corev1.Pod
		if err := json.Unmarshal(patched, &got); err != nil {
			t.Fatal(err)
		}
		if m := mutationOf(&got); m != c.want || got.Labels[wi.UseLabel] != "true" {
			t.Errorf("%s: the pod's change is %s with labels %v, want %s and the pod's own label kept", c.name, m, got.Labels, c.want)
		}
		if m := benchWebhookMutates[c.name]; m != c.want {
			t.Errorf("%s: the bench expects %s, want %s", c.name, m, c.want)
		}
	}
}

// labelledPodReview is kube-apiserver's review (in apiVersion, with UID "uid-"+uid) of a
// labelled pod of service account "app" in namespace "ns", and the pod's JSON in it.
func labelledPodReview(t *testing.T, apiVersion, uid string) (pod, body []byte) {
	t.Helper()
	pod, err := json.Marshal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{wi.UseLabel: "true"}},
		Spec: corev1.PodSpec{ServiceAccountName: "app", Containers: []corev1.Container{{Name: "app", Image: "app"}}}})
	if err != nil {
		t.Fatal(err)
	}
	body, err = json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("uid-" + uid), Namespace: "ns", Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: pod}}})
	if err != nil {
		t.Fatal(err)
	}
	return pod, body
}
