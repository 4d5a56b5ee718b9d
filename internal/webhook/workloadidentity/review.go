package workloadidentity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// maxReviewSize bounds a review's body as controller-runtime does: two objects of at most 3 MB
// (kube-apiserver's limit) and the rest.
const maxReviewSize = 7 << 20

// review is what the webhook reads of an AdmissionReview (v1 or v1beta1: their fields are the
// same), the pod included. Decoding it in one pass replaces controller-runtime's three (the
// review's kind, the review with the pod kept raw, then the pod): half the handler's CPU.
type review struct {
	APIVersion string         `json:"apiVersion"`
	Request    *reviewRequest `json:"request"`
}

type reviewRequest struct {
	UID       types.UID               `json:"uid"`
	Kind      metav1.GroupVersionKind `json:"kind"`
	Namespace string                  `json:"namespace"`
	Operation admissionv1.Operation   `json:"operation"`
	Object    *sparsePod              `json:"object"`
}

// reviewLog is built once: a logger's WithName and WithValues allocate, and this is every pod's path.
var reviewLog = logf.Log.WithName("admission").WithValues("webhook", Path)

// ServeHTTP answers kube-apiserver's AdmissionReview with an AdmissionReview of the same version;
// a request it cannot read gets a refusal in that format, as the API server expects.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	log := reviewLog
	var rev review
	if err := readReview(r, &rev); err != nil {
		log.Error(err, "Cannot read the admission review")
		resp := admission.Errored(http.StatusBadRequest, err)
		if rev.Request != nil {
			// A review whose pod has a field of the wrong type still names its UID, which
			// kube-apiserver matches before it shows the user this message.
			resp.UID = rev.Request.UID
		}
		writeReview(w, log, rev.APIVersion, resp)
		return
	}
	req := rev.Request
	// Every request is timed, as upstream does (its objectSelector sends only labelled pods).
	defer func() { reportRequest(req.Namespace, time.Since(start)) }()
	log = log.WithValues("namespace", req.Namespace, "requestID", req.UID)
	resp := h.admit(logf.IntoContext(r.Context(), log), req)
	resp.UID = req.UID
	writeReview(w, log, rev.APIVersion, resp)
}

func readReview(r *http.Request, rev *review) error {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("content type %q, want application/json", ct)
	}
	body := bodies.Get().(*bytes.Buffer)
	defer putBody(body)
	body.Reset()
	if n := r.ContentLength; n > 0 && n <= maxReviewSize {
		body.Grow(int(n))
	}
	if _, err := body.ReadFrom(io.LimitReader(r.Body, maxReviewSize+1)); err != nil {
		return fmt.Errorf("read the body: %w", err)
	}
	if body.Len() > maxReviewSize {
		return fmt.Errorf("the body is larger than %d bytes", maxReviewSize)
	}
	// kube-apiserver's own JSON rules: case-sensitive names, integers kept whole. The decoder
	// copies every string it keeps, so nothing decoded refers to the buffer.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body.Bytes(), rev); err != nil {
		return fmt.Errorf("decode the admission review: %w", err)
	}
	if rev.Request == nil {
		return errors.New("the admission review has no request")
	}
	return nil
}

// bodies keeps review bodies' buffers between requests: reading each pod's review into a new
// buffer was a third of the bytes an admission allocated, and so of the webhook's collections.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody bounds the buffers kept: a rare large review's buffer is left to the collector.
const maxPooledBody = 64 << 10

func putBody(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBody {
		bodies.Put(b)
	}
}

// writeReview writes resp in an AdmissionReview of apiVersion (v1 when unknown).
func writeReview(w http.ResponseWriter, log logr.Logger, apiVersion string, resp admission.Response) {
	if apiVersion == "" {
		apiVersion = admissionv1.SchemeGroupVersion.String()
	}
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Response: &resp.AdmissionResponse,
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		log.Error(err, "Cannot write the admission response")
	}
}
