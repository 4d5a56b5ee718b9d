package podidentity

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/grants"
	"github.com/cerulean/cerulean/internal/podidentity"
)

// IdentityPath is where the AzureIdentity check is served.
const IdentityPath = "/validate-azureidentity"

// IdentityWebhookName is the AzureIdentity check's name in the configuration.
const IdentityWebhookName = "azureidentity.pod-identity.cerulean.dev"

// +kubebuilder:rbac:groups=cerulean.dev,resources=namespacegrants,verbs=get;list;watch

// IdentityValidator refuses an AzureIdentity (create or update) naming an identity its
// namespace was not granted: the cluster admin decides which namespaces use which identities.
type IdentityValidator struct {
	Reader  client.Reader
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (v *IdentityValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "AzureIdentity" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("")
	}
	var ai aadv1.AzureIdentity
	if err := v.Decoder.Decode(req, &ai); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode AzureIdentity: %w", err))
	}
	if ai.Namespace == "" {
		ai.Namespace = req.Namespace
	}
	if req.Operation == admissionv1.Update {
		// Metadata-only updates (finalizers, labels, a deletion) are never blocked.
		var old aadv1.AzureIdentity
		if err := v.Decoder.DecodeRaw(req.OldObject, &old); err == nil && equality.Semantic.DeepEqual(old.Spec, ai.Spec) || ai.DeletionTimestamp != nil {
			return admission.Allowed("")
		}
	}
	var list ceruleanv1.NamespaceGrantList
	if err := v.Reader.List(ctx, &list); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list namespace grants: %w", err))
	}
	if err := grants.CheckSecret(&ai); err != nil {
		return admission.Denied(err.Error())
	}
	if err := grants.CheckAzureIdentity(list.Items, ai.Namespace, &ai); err != nil {
		return admission.Denied(err.Error())
	}
	return admission.Allowed("")
}

// notGranted returns the refusal of the first match whose identity the pod's namespace, or the
// identity's own, was not granted; "" when all are.
func notGranted(all []ceruleanv1.NamespaceGrant, podNS string, matches []podidentity.Match) string {
	for _, m := range matches {
		err := grants.CheckAzureIdentity(all, m.Identity.Namespace, m.Identity)
		if err == nil && podNS != m.Identity.Namespace {
			err = grants.CheckAzureIdentity(all, podNS, m.Identity)
		}
		if errors.Is(err, grants.ErrNotGranted) {
			return fmt.Sprintf("AzureIdentityBinding %s/%s selects AzureIdentity %s/%s: %s", m.Binding.Namespace, m.Binding.Name, m.Identity.Namespace, m.Identity.Name, err)
		}
	}
	return ""
}
