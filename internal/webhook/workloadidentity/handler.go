package workloadidentity

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cerulean/cerulean/internal/webhook/registration"
)

// Registration facts: the path and name users' configurations and tools look for.
const (
	Path = "/mutate-v1-pod"
	// WebhookName names the webhook inside its configuration.
	WebhookName = "pods.workload-identity.cerulean.dev"
	// ConfigurationName is the MutatingWebhookConfiguration the manager owns.
	ConfigurationName = "cerulean-workload-identity"
	// TimeoutSeconds is short: the handler answers from a cache in well under a millisecond, and
	// with failurePolicy Fail a hung call should fail pod creation fast, not after 10 s.
	TimeoutSeconds = int32(3)
)

// Handler is the webhook's http.Handler (review.go reads kube-apiserver's AdmissionReview). It
// reads service accounts' metadata through Reader (the manager's cache) and, when the cache has
// not seen one yet, through APIReader.
type Handler struct {
	Reader    client.Reader
	APIReader client.Reader
	Config    Config
}

// Setup registers the webhook at Path on the manager's webhook server.
func Setup(mgr ctrl.Manager, cfg Config) error {
	registerMetrics()
	mgr.GetWebhookServer().Register(Path, &Handler{Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: cfg})
	return nil
}

// admit mutates a labelled pod at creation; anything else is allowed unchanged. The response's
// UID is the caller's to set.
func (h *Handler) admit(ctx context.Context, req *reviewRequest) (resp admission.Response) {
	defer func() {
		if r := recover(); r != nil {
			// As controller-runtime's admission handler does: a bug answers 500, not a dropped stream.
			logf.FromContext(ctx).Error(fmt.Errorf("%v", r), "Panic in the workload identity webhook")
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", r))
		}
	}()
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Pod" || req.Object == nil {
		return admission.Allowed("not a pod creation")
	}
	pod := req.Object.pod()
	if pod.Labels[UseLabel] != "true" {
		return admission.Allowed("pod does not use workload identity")
	}
	saName := pod.Spec.ServiceAccountName
	if saName == "" {
		saName = "default"
	}
	sa, err := h.serviceAccount(ctx, types.NamespacedName{Namespace: req.Namespace, Name: saName})
	if err != nil {
		logf.FromContext(ctx).Error(err, "Cannot mutate pod", "serviceAccount", saName)
		return admission.Errored(http.StatusBadRequest, err)
	}
	before := shapeOf(pod)
	warnings, err := Mutate(pod, sa, h.Config)
	if err != nil {
		return admission.Denied(err.Error())
	}
	// The patch is built from what Mutate appended: a pod is neither decoded whole nor encoded
	// again and diffed.
	resp = admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true}}
	if ops := patch(before, pod); len(ops) > 0 {
		if resp.Patch, err = json.Marshal(ops); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode patch: %w", err))
		}
		resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	}
	return resp.WithWarnings(warnings...)
}

// serviceAccount reads the metadata of a service account (its annotations are all Mutate
// reads): from the manager's cache, which then holds only service accounts' metadata, and
// when the cache has not seen it, from the API server.
func (h *Handler) serviceAccount(ctx context.Context, key types.NamespacedName) (*corev1.ServiceAccount, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	err := h.Reader.Get(ctx, key, m)
	if err != nil && h.APIReader != nil {
		// The cache may not have seen a service account created just before its pod, or may not
		// watch its namespace (a manager limited to some namespaces).
		err = h.APIReader.Get(ctx, key, m)
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("service account %s/%s not found", key.Namespace, key.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("get service account %s/%s: %w", key.Namespace, key.Name, err)
	}
	return &corev1.ServiceAccount{ObjectMeta: m.ObjectMeta}, nil
}

// Configuration is the MutatingWebhookConfiguration of the webhook: pods CREATE,
// failurePolicy Fail, reinvocationPolicy IfNeeded, an objectSelector on the opt-in label, a short
// timeout and no side effects.
func Configuration(cc registration.ClientConfig) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	wcc, err := cc.For(Path)
	if err != nil {
		return nil, err
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: registration.Meta(ConfigurationName),
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         WebhookName,
			ClientConfig: wcc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{UseLabel: "true"}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	}, nil
}

// Apply creates or updates the configuration; a nil CABundle keeps the one there (a CA
// injector's). Under `cerulean-local up` the manager registers itself by URL; in a cluster the
// chart installs the configuration.
func Apply(ctx context.Context, c client.Client, cc registration.ClientConfig) error {
	want, err := Configuration(cc)
	if err != nil {
		return err
	}
	return registration.Apply(ctx, c, want, cc.CABundle == nil)
}
