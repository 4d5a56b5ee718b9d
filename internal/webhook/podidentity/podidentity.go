// Package podidentity is the admission check of pod identity: a pod may carry the
// aadpodidbinding label of a binding only when whoever creates or relabels it, or the pod's
// service account, may "use" that AzureIdentityBinding. It stops a pod from gaining an identity
// by labelling itself.
package podidentity

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/podidentity"
	"github.com/cerulean/cerulean/internal/webhook/registration"
)

// UseVerb is the RBAC verb on azureidentitybindings that allows a pod to select a binding.
const UseVerb = "use"

// Path is where the webhook is served.
const Path = "/validate-aadpodidbinding"

// Validator checks pods' aadpodidbinding labels.
type Validator struct {
	// Reader lists bindings and identities.
	Reader client.Reader
	// Client creates SubjectAccessReviews.
	Client client.Client
	// Decoder decodes pods.
	Decoder admission.Decoder
	// AllowUngrantedIdentities skips the NamespaceGrant check (upstream's behaviour).
	AllowUngrantedIdentities bool
}

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Handle implements admission.Handler for pod CREATE and UPDATE.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "Pod" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("")
	}
	var pod corev1.Pod
	if err := v.Decoder.Decode(req, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err))
	}
	label := pod.Labels[aadv1.PodLabel]
	if label == "" {
		return admission.Allowed("")
	}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		var old corev1.Pod
		if err := v.Decoder.DecodeRaw(req.OldObject, &old); err == nil && old.Labels[aadv1.PodLabel] == label {
			return admission.Allowed("") // unchanged: checked when it was set
		}
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	var bindings aadv1.AzureIdentityBindingList
	if err := v.Reader.List(ctx, &bindings); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list bindings: %w", err))
	}
	var ids aadv1.AzureIdentityList
	if err := v.Reader.List(ctx, &ids); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list identities: %w", err))
	}
	matches := podidentity.Matches(&pod, bindings.Items, ids.Items)
	if len(matches) == 0 {
		return admission.Allowed("") // selects nothing: no identity to gain
	}
	if !v.AllowUngrantedIdentities {
		var list ceruleanv1.NamespaceGrantList
		if err := v.Reader.List(ctx, &list); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list namespace grants: %w", err))
		}
		if msg := notGranted(list.Items, pod.Namespace, matches); msg != "" {
			return admission.Denied(fmt.Sprintf("label %s=%q: %s", aadv1.PodLabel, label, msg))
		}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	saUser := "system:serviceaccount:" + pod.Namespace + ":" + sa
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + pod.Namespace, "system:authenticated"}
	var denied []string
	for _, m := range matches {
		okUser, err := v.mayUse(ctx, req.UserInfo.Username, req.UserInfo.Groups, req.UserInfo.UID, m.Binding)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		okSA := false
		if !okUser {
			if okSA, err = v.mayUse(ctx, saUser, saGroups, "", m.Binding); err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
		}
		if !okUser && !okSA {
			denied = append(denied, m.Binding.Namespace+"/"+m.Binding.Name)
		}
	}
	if len(denied) > 0 {
		return admission.Denied(fmt.Sprintf("label %s=%q selects AzureIdentityBinding %s; neither %s nor the pod's service account %s may %q it (grant verb %q on azureidentitybindings.aadpodidentity.k8s.io)",
			aadv1.PodLabel, label, strings.Join(denied, ", "), req.UserInfo.Username, saUser, UseVerb, UseVerb))
	}
	return admission.Allowed("")
}

func (v *Validator) mayUse(ctx context.Context, user string, groups []string, uid string, b *aadv1.AzureIdentityBinding) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups, UID: uid,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: b.Namespace, Verb: UseVerb,
			Group: aadv1.GroupVersion.Group, Resource: "azureidentitybindings", Name: b.Name},
	}}
	if err := v.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("review access: %w", err)
	}
	return sar.Status.Allowed, nil
}

// Registration of the check with kube-apiserver.
const (
	// ConfigurationName is the ValidatingWebhookConfiguration the manager owns.
	ConfigurationName = "cerulean-pod-identity"
	// WebhookName is the webhook's name in it.
	WebhookName = "aadpodidbinding.pod-identity.cerulean.dev"
	// TimeoutSeconds is short: a hung call with failurePolicy Fail should fail fast.
	TimeoutSeconds = int32(5)
)

// Configuration is the ValidatingWebhookConfiguration of the check: pods CREATE and UPDATE whose
// new or old object carries the aadpodidbinding label, failurePolicy Fail (a pod must not gain an
// identity because the check was unreachable), no side effects.
func Configuration(cc registration.ClientConfig) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	wcc, err := cc.For(Path)
	if err != nil {
		return nil, err
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: registration.Meta(ConfigurationName),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         WebhookName,
			ClientConfig: wcc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchPolicy:   ptr.To(admissionregistrationv1.Equivalent),
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: aadv1.PodLabel, Operator: metav1.LabelSelectorOpExists},
			}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
		}, identityWebhook(wcc)},
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

// Setup registers the checks at Path and IdentityPath on the manager's webhook server;
// bindings, identities and grants are read from the manager's cache. allowUngranted turns the
// NamespaceGrant checks off (upstream's behaviour): AzureIdentity objects are then all allowed.
func Setup(mgr ctrl.Manager, allowUngranted bool) {
	dec := admission.NewDecoder(mgr.GetScheme())
	v := &Validator{Reader: mgr.GetClient(), Client: mgr.GetClient(), Decoder: dec, AllowUngrantedIdentities: allowUngranted}
	mgr.GetWebhookServer().Register(Path, &webhook.Admission{Handler: v})
	var iv admission.Handler = &IdentityValidator{Reader: mgr.GetClient(), Decoder: dec}
	if allowUngranted {
		iv = admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })
	}
	mgr.GetWebhookServer().Register(IdentityPath, &webhook.Admission{Handler: iv})
}

// identityWebhook is the AzureIdentity check: create and update, failurePolicy Fail.
func identityWebhook(wcc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.ValidatingWebhook {
	if wcc.Service != nil {
		svc := *wcc.Service
		svc.Path = ptr.To(IdentityPath)
		wcc.Service = &svc
	} else if wcc.URL != nil {
		wcc.URL = ptr.To(strings.TrimSuffix(*wcc.URL, Path) + IdentityPath)
	}
	return admissionregistrationv1.ValidatingWebhook{
		Name:         IdentityWebhookName,
		ClientConfig: wcc,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{aadv1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"azureidentities"},
				Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}},
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To(TimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
	}
}
