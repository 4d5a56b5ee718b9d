// Package armgrants is the admission check of Azure resources reconciled with the manager's
// global credential: every ARM id their spec names (owner.armId, a RoleAssignment's scope,
// any other armId reference, any ARM id in a generic AzureResource's body) must be inside the
// scopes a NamespaceGrant gives their namespace.
// The controller checks again before any Azure call (it also knows the resource's own ARM id);
// this check gives the refusal at kubectl apply time. It also refuses export expressions that do
// not compile, whatever the credential and even with the scope checks off
// (--allow-ungranted-scopes), which the controller would refuse before any ARM write.
package armgrants

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/controller/armresource"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/grants"
	"github.com/cerulean/cerulean/internal/webhook/registration"
)

// Registration of the check.
const (
	Path              = "/validate-arm-grants"
	ConfigurationName = "cerulean-arm-grants"
	WebhookName       = "scopes.arm-grants.cerulean.dev"
	timeoutSeconds    = int32(5)
)

// +kubebuilder:rbac:groups=cerulean.dev,resources=namespacegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Validator checks the ARM references of Azure resources.
type Validator struct {
	// Reader lists grants; APIReader reads a namespace's credential Secret (not cached).
	Reader    client.Reader
	APIReader client.Reader
	// AllowUngrantedScopes turns the scope check off (Azure Service Operator's cluster-wide
	// trust); expressions are still compiled.
	AllowUngrantedScopes bool
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var obj unstructured.Unstructured
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode object: %w", err))
	}
	ns := req.Namespace
	if req.Operation == admissionv1.Update {
		// Metadata-only updates (the manager's finalizer, annotations, a deletion's finalizer
		// removal) must never be blocked: only a changed spec is judged again.
		var old unstructured.Unstructured
		if err := old.UnmarshalJSON(req.OldObject.Raw); err == nil && equality.Semantic.DeepEqual(old.Object["spec"], obj.Object["spec"]) {
			return admission.Allowed("")
		}
		if obj.GetDeletionTimestamp() != nil {
			return admission.Allowed("")
		}
	}
	if err := armresource.CompileExpressions(&obj); err != nil {
		return admission.Denied(fmt.Sprintf("%s %s/%s: %s", obj.GetKind(), ns, obj.GetName(), err))
	}
	if v.AllowUngrantedScopes {
		return admission.Allowed("")
	}
	if _, own := obj.GetAnnotations()[credentials.AnnotationCredentialFrom]; own {
		return admission.Allowed("") // its own credential: Azure limits it
	}
	var s corev1.Secret
	err := v.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: credentials.NamespaceSecretName}, &s)
	switch {
	case err == nil:
		return admission.Allowed("") // the namespace's credential: Azure limits it
	case !apierrors.IsNotFound(err):
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("read the namespace's credential secret: %w", err))
	}
	refs := armresource.References(&obj)
	if len(refs) == 0 {
		return admission.Allowed("")
	}
	var list ceruleanv1.NamespaceGrantList
	if err := v.Reader.List(ctx, &list); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list namespace grants: %w", err))
	}
	if err := grants.CheckScopes(list.Items, ns, refs); err != nil {
		if errors.Is(err, grants.ErrNotGranted) {
			return admission.Denied(fmt.Sprintf("%s %s/%s uses the manager's global credential: %s", obj.GetKind(), ns, obj.GetName(), err))
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Allowed("")
}

// Groups are the API groups of Azure Service Operator's kinds the manager reconciles (every
// kind of theirs is an ARM kind); Cerulean's own group holds other kinds too, so only its
// generic kind is checked (GenericResource).
func Groups() []string {
	set := map[string]bool{}
	for _, k := range armresource.Kinds() {
		if k.GVK.Group != armresource.GroupCerulean {
			set[k.GVK.Group] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// GenericResource is the resource of the generic kind (AzureResource) in Cerulean's group.
const GenericResource = "azureresources"

// Configuration is the check's ValidatingWebhookConfiguration: every kind of the ARM groups,
// create and update, failurePolicy Fail.
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
				Rule: admissionregistrationv1.Rule{APIGroups: Groups(), APIVersions: []string{"*"}, Resources: []string{"*"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}, {
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{armresource.GroupCerulean}, APIVersions: []string{"*"},
					Resources: []string{GenericResource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(timeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
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

// Setup registers the check on the manager's webhook server.
func Setup(mgr ctrl.Manager, allowUngrantedScopes bool) {
	mgr.GetWebhookServer().Register(Path, &webhook.Admission{Handler: &Validator{Reader: mgr.GetClient(),
		APIReader: mgr.GetAPIReader(), AllowUngrantedScopes: allowUngrantedScopes}})
}
