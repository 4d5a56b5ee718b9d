package workloadidentity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serve posts an AdmissionReview of pod (raw JSON, valid or not) to h as kube-apiserver does and
// returns the response, checking that it answers the request's UID.
func serve(t *testing.T, h *Handler, op admissionv1.Operation, pod string) admissionv1.AdmissionResponse {
	t.Helper()
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},` +
		`"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"ns","operation":"` + string(op) + `","object":` + pod + `}}`
	rev := post(t, h, "application/json", body)
	if rev.APIVersion != "admission.k8s.io/v1" || rev.Kind != "AdmissionReview" {
		t.Errorf("answered as %s %s, want an admission.k8s.io/v1 AdmissionReview", rev.APIVersion, rev.Kind)
	}
	if rev.Response.UID != "u-1" && json.Valid([]byte(body)) {
		t.Errorf("response UID %q, want the request's", rev.Response.UID)
	}
	return *rev.Response
}

func post(t *testing.T, h http.Handler, contentType, body string) admissionv1.AdmissionReview {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, Path, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var rev admissionv1.AdmissionReview
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &rev) != nil || rev.Response == nil {
		t.Fatalf("answer %d %s, want an AdmissionReview", w.Code, w.Body)
	}
	return rev
}

// TestReviewsTheAPIServerCannotSendWell: a review the handler cannot read is refused in the
// format kube-apiserver reads, with the reason; one it can read is answered in its own version.
func TestReviewsTheAPIServerCannotSendWell(t *testing.T) {
	h := &Handler{Reader: saReader{sa: sa(map[string]string{ClientIDAnnotation: clientID})}, Config: cfg}
	labelled := `{"metadata":{"labels":{"azure.workload.identity/use":"true"}},"spec":{"serviceAccountName":"app","containers":[{"name":"a"}]}}`
	for name, tc := range map[string]struct {
		contentType, body, msg string
	}{
		"empty body":        {contentType: "application/json", body: "", msg: "decode the admission review"},
		"not JSON":          {contentType: "application/json", body: "{", msg: "decode the admission review"},
		"no request":        {contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, msg: "no request"},
		"YAML content type": {contentType: "application/yaml", body: `{}`, msg: `content type "application/yaml"`},
		"larger than 7 MiB": {contentType: "application/json", body: `{"request":{"object":` + labelled[:len(labelled)-1] + `,"x":"` + strings.Repeat("a", maxReviewSize) + `"}}}`, msg: "larger than"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := post(t, h, tc.contentType, tc.body).Response
			if resp.Allowed || len(resp.Patch) > 0 || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, tc.msg) {
				t.Errorf("response %+v, want a 400 refusal with %q", resp, tc.msg)
			}
		})
	}

	t.Run("a pod field of the wrong type keeps the request's UID", func(t *testing.T) {
		body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-2","kind":{"kind":"Pod"},"operation":"CREATE","object":{"metadata":{"labels":5}}}}`
		resp := post(t, h, "application/json", body).Response
		if resp.Allowed || resp.UID != "u-2" || resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
			t.Errorf("response %+v, want a 400 refusal of u-2", resp)
		}
	})

	t.Run("v1beta1 is answered in v1beta1", func(t *testing.T) {
		body := `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u-3","kind":{"version":"v1","kind":"Pod"},"namespace":"ns","operation":"CREATE","object":` + labelled + `}}`
		rev := post(t, h, "application/json", body)
		if rev.APIVersion != "admission.k8s.io/v1beta1" || rev.Response.UID != "u-3" || !rev.Response.Allowed || !bytes.Contains(rev.Response.Patch, []byte(ClientIDEnv)) {
			t.Errorf("answer %s %+v, want a v1beta1 review allowing u-3 with the patch", rev.APIVersion, rev.Response)
		}
	})
}

// panicReader fails as a bug would.
type panicReader struct{ saReader }

func (panicReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	panic("a bug")
}

// A bug in the handler answers 500 to the request's UID, as controller-runtime's handler did,
// rather than dropping kube-apiserver's stream.
func TestAPanicAnswers500(t *testing.T) {
	h := &Handler{Reader: panicReader{}, Config: cfg}
	resp := serve(t, h, admissionv1.Create, `{"metadata":{"labels":{"azure.workload.identity/use":"true"}},"spec":{"serviceAccountName":"app","containers":[{"name":"a"}]}}`)
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusInternalServerError || !strings.Contains(resp.Result.Message, "a bug") {
		t.Errorf("response %+v, want a 500 refusal naming the panic", resp)
	}
}

// Review bodies are read into buffers kept between requests: each review, read after a larger
// one, after one that failed, or beside others at once, is answered alone (its own UID, its own
// namespace's patch), never with a byte of another's.
func TestReviewsAreReadEachOnItsOwn(t *testing.T) {
	h := &Handler{Reader: saReader{sa: sa(map[string]string{ClientIDAnnotation: clientID})}, Config: cfg}
	review := func(uid, annotation string) string {
		return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + uid + `","kind":{"version":"v1","kind":"Pod"},"namespace":"ns","operation":"CREATE","object":` +
			`{"metadata":{"labels":{"azure.workload.identity/use":"true"},"annotations":{"note":"` + annotation + `"}},"spec":{"serviceAccountName":"app","containers":[{"name":"a"}]}}}}`
	}
	answered := func(uid string, rev admissionv1.AdmissionReview) error {
		if resp := rev.Response; resp.UID != types.UID(uid) || !resp.Allowed || !bytes.Contains(resp.Patch, []byte(ClientIDEnv)) {
			return fmt.Errorf("review %s answered %+v, want it allowed with the patch", uid, resp)
		}
		return nil
	}
	for _, step := range []struct{ uid, annotation string }{
		{"large", strings.Repeat("x", 2*maxPooledBody)}, {"after-large", "a"}, {"not-json", ""}, {"after-failure", "b"},
	} {
		if step.uid == "not-json" {
			post(t, h, "application/json", "{")
			continue
		}
		if err := answered(step.uid, post(t, h, "application/json", review(step.uid, step.annotation))); err != nil {
			t.Error(err)
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				uid := fmt.Sprintf("g%d-%d", g, i)
				req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, Path, strings.NewReader(review(uid, strings.Repeat("y", i*100))))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				var rev admissionv1.AdmissionReview
				if err := json.Unmarshal(w.Body.Bytes(), &rev); err != nil || rev.Response == nil {
					errs <- fmt.Errorf("review %s: answer %d %s", uid, w.Code, w.Body)
					continue
				}
				if err := answered(uid, rev); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
