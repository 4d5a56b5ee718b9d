package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/azure"
)

// Keys of a service-principal AzureIdentity's clientPassword Secret, as aad-pod-identity reads
// them: the client secret (type 1), or a certificate with its key, PEM or PKCS#12, and the
// PKCS#12 password (type 2).
const (
	SecretKeyClientSecret = "clientSecret"
	SecretKeyCertificate  = "certificate"
	SecretKeyPassword     = "password"
)

// SPError is a refusal for a service-principal identity whose credentials cannot be used: its
// message names the objects and the fix, never the Secret's content.
type SPError struct{ Message string }

func (e *SPError) Error() string { return e.Message }

// spSource gets tokens of service-principal AzureIdentities (type 1: client secret, type 2:
// certificate) with the client-credentials flow at Entra ID, reading the identity's Secret when
// the cache misses (Secrets are read directly, never watched: the agent holds none).
type spSource struct {
	secrets client.Reader
	opts    azcore.ClientOptions
	now     func() time.Time
	metrics *metrics
}

var aadstsCode = regexp.MustCompile(`AADSTS\d+`)

func (s *spSource) Token(ctx context.Context, id Identity, resource string) (Token, error) {
	ai := id.sp
	cred, err := s.credential(ctx, ai)
	if err != nil {
		return Token{}, err
	}
	scope := strings.TrimSuffix(resource, "/") + "/.default"
	start := time.Now()
	at, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	s.metrics.observeFetch(opTokenSP, time.Since(start), err)
	if err != nil {
		if _, ok := errors.AsType[*azidentity.AuthenticationFailedError](err); ok {
			code := aadstsCode.FindString(err.Error())
			if code == "" {
				code = "no AADSTS code"
			}
			return Token{}, &SPError{fmt.Sprintf("Entra ID refused the credentials of service principal %s (AzureIdentity %s/%s): %s.",
				ai.Spec.ClientID, ai.Namespace, ai.Name, code)}
		}
		return Token{}, fmt.Errorf("get token of service principal %s: %w", ai.Spec.ClientID, err)
	}
	return Token{AccessToken: at.Token, ClientID: ai.Spec.ClientID, Resource: resource, ExpiresOn: at.ExpiresOn, NotBefore: s.now()}, nil
}

// credential builds the identity's credential from its Secret.
func (s *spSource) credential(ctx context.Context, ai *aadv1.AzureIdentity) (azcore.TokenCredential, error) {
	ref := ai.Spec.ClientPassword
	ns := ref.Namespace
	if ns == "" {
		ns = ai.Namespace
	}
	what := fmt.Sprintf("Secret %s/%s (clientPassword of AzureIdentity %s/%s)", ns, ref.Name, ai.Namespace, ai.Name)
	if ai.Spec.ClientID == "" || ai.Spec.TenantID == "" || ref.Name == "" {
		return nil, &SPError{fmt.Sprintf("AzureIdentity %s/%s of type %d needs clientID, tenantID and clientPassword.", ai.Namespace, ai.Name, ai.Spec.Type)}
	}
	// Secure by default: whoever may write AzureIdentities in a namespace must not turn another
	// namespace's Secret into tokens (upstream reads any namespace).
	if ns != ai.Namespace {
		return nil, &SPError{fmt.Sprintf("%s is in another namespace: an AzureIdentity's clientPassword must be a Secret of its own namespace (%s).", what, ai.Namespace)}
	}
	var sec corev1.Secret
	err := s.secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &sec)
	if err != nil {
		s.metrics.kubeErrors.WithLabelValues(opGetSecret).Inc()
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, &SPError{what + " was not found."}
	case apierrors.IsForbidden(err):
		return nil, &SPError{"The node agent may not read " + what + ": grant its service account get on that Secret."}
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	opts := s.opts
	if ai.Spec.ADEndpoint != "" {
		opts.Cloud.ActiveDirectoryAuthorityHost = ai.Spec.ADEndpoint
	}
	cc := azure.ClientCredential{TenantID: ai.Spec.TenantID, ClientID: ai.Spec.ClientID, AdditionallyAllowedTenants: ai.Spec.AuxiliaryTenantIDs}
	switch ai.Spec.Type {
	case aadv1.ServicePrincipal:
		if cc.Secret = string(sec.Data[SecretKeyClientSecret]); cc.Secret == "" {
			return nil, &SPError{what + " has no key " + SecretKeyClientSecret + "."}
		}
		return azure.NewCredential(cc, opts)
	case aadv1.ServicePrincipalCertificate:
		if cc.Certificate = sec.Data[SecretKeyCertificate]; len(cc.Certificate) == 0 {
			return nil, &SPError{what + " has no key " + SecretKeyCertificate + "."}
		}
		cc.CertificatePassword, cc.SendCertificateChain = string(sec.Data[SecretKeyPassword]), true
		cred, err := azure.NewCredential(cc, opts)
		if errors.Is(err, azure.ErrBadCertificate) {
			return nil, &SPError{fmt.Sprintf("%s: key %s is not a certificate with its private key (PEM, or PKCS#12 with key %s as its password).", what, SecretKeyCertificate, SecretKeyPassword)}
		}
		return cred, err
	}
	return nil, &SPError{fmt.Sprintf("AzureIdentity %s/%s has type %d, not a service principal (1 or 2).", ai.Namespace, ai.Name, ai.Spec.Type)}
}

// sources sends service-principal identities to sp and managed identities to msi.
type sources struct {
	msi     Source
	sp      *spSource
	metrics *metrics
}

func (s sources) Token(ctx context.Context, id Identity, resource string) (Token, error) {
	if id.sp != nil {
		return s.sp.Token(ctx, id, resource)
	}
	start := time.Now()
	t, err := s.msi.Token(ctx, id, resource)
	s.metrics.observeFetch(opTokenMSIUserAssigned, time.Since(start), err)
	return t, err
}
