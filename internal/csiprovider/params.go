package csiprovider

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Attribute keys the driver adds to the SecretProviderClass parameters.
const (
	AttrPodName        = "csi.storage.k8s.io/pod.name"
	AttrPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	AttrServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	AttrSATokens       = "csi.storage.k8s.io/serviceAccount.tokens" //nolint:gosec // a key name, not a credential
)

// TokenExchangeAudience is the audience of the service-account token workload identity
// exchanges, as the driver's CSIDriver tokenRequests name it.
const TokenExchangeAudience = "api://AzureADTokenExchange" //nolint:gosec // an audience, not a credential

// ErrInvalidParameters reports a mount request the provider cannot act on.
var ErrInvalidParameters = errors.New("invalid SecretProviderClass parameters")

// AuthMode is how a mount authenticates to Entra ID.
type AuthMode string

// The four ways, with the parameters that select them.
const (
	AuthWorkloadIdentity  AuthMode = "workloadIdentity"  // clientID + the pod's service-account token
	AuthVMManagedIdentity AuthMode = "vmManagedIdentity" // useVMManagedIdentity (+ userAssignedIdentityID)
	AuthPodIdentity       AuthMode = "podIdentity"       // usePodIdentity, through the node agent
	AuthServicePrincipal  AuthMode = "servicePrincipal"  // nodePublishSecretRef clientid / clientsecret
)

// mount is a parsed MountRequest.
type mount struct {
	vaultName    string
	tenantID     string
	cloudName    string
	mode         AuthMode
	clientID     string // workload identity's client id, or the service principal's
	clientSecret string
	saToken      string
	userAssigned string // userAssignedIdentityID: client id or resource id
	podName      string
	podNamespace string
	objects      []Object
	permission   os.FileMode
}

var vaultNameRE = regexp.MustCompile(`^[-A-Za-z0-9]{3,24}$`)

// parseMount reads the request's attributes, secrets and permission as the driver sends them:
// attributes and secrets are JSON objects of strings, permission the JSON of a file mode (a
// decimal number, "420" for 0644).
func parseMount(attributes, secrets, permission string) (*mount, error) {
	var attrib map[string]string
	if err := json.Unmarshal([]byte(attributes), &attrib); err != nil {
		return nil, fmt.Errorf("%w: attributes are not a JSON object of strings", ErrInvalidParameters)
	}
	sec := map[string]string{}
	if strings.TrimSpace(secrets) != "" {
		if err := json.Unmarshal([]byte(secrets), &sec); err != nil {
			return nil, fmt.Errorf("%w: node-publish secrets are not a JSON object of strings", ErrInvalidParameters)
		}
	}
	var perm uint32
	if err := json.Unmarshal([]byte(permission), &perm); err != nil || perm > 0o777 {
		return nil, fmt.Errorf("%w: permission %q is not a file mode", ErrInvalidParameters, permission)
	}
	get := func(k string) string { return strings.TrimSpace(attrib[k]) }
	m := &mount{
		vaultName:    get("keyvaultName"),
		tenantID:     get("tenantID"),
		cloudName:    get("cloudName"),
		clientID:     get("clientID"),
		userAssigned: get("userAssignedIdentityID"),
		podName:      get(AttrPodName),
		podNamespace: get(AttrPodNamespace),
		permission:   os.FileMode(perm),
	}
	if m.tenantID == "" {
		m.tenantID = get("tenantId") // deprecated spelling, still what most classes use
	}
	if m.vaultName == "" {
		return nil, fmt.Errorf("%w: keyvaultName is not set", ErrInvalidParameters)
	}
	if !vaultNameRE.MatchString(m.vaultName) {
		return nil, fmt.Errorf("%w: keyvaultName %q must be 3-24 letters, digits and hyphens", ErrInvalidParameters, m.vaultName)
	}
	if m.tenantID == "" {
		return nil, fmt.Errorf("%w: tenantID is not set", ErrInvalidParameters)
	}
	usePod, err := parseBool(attrib, "usePodIdentity")
	if err != nil {
		return nil, err
	}
	useVM, err := parseBool(attrib, "useVMManagedIdentity")
	if err != nil {
		return nil, err
	}
	switch {
	case usePod && useVM:
		return nil, fmt.Errorf("%w: usePodIdentity and useVMManagedIdentity cannot both be true", ErrInvalidParameters)
	case (usePod || useVM) && m.clientID != "":
		return nil, fmt.Errorf("%w: clientID (workload identity) cannot be combined with usePodIdentity or useVMManagedIdentity", ErrInvalidParameters)
	case m.userAssigned != "" && !useVM:
		return nil, fmt.Errorf("%w: userAssignedIdentityID needs useVMManagedIdentity: \"true\"", ErrInvalidParameters)
	case m.clientID != "":
		m.mode = AuthWorkloadIdentity
		tok, err := exchangeToken(attrib[AttrSATokens])
		if err != nil {
			return nil, err
		}
		m.saToken = tok
	case useVM:
		m.mode = AuthVMManagedIdentity
	case usePod:
		m.mode = AuthPodIdentity
		if m.podName == "" || m.podNamespace == "" {
			return nil, fmt.Errorf("%w: usePodIdentity needs the pod's name and namespace (%s, %s)", ErrInvalidParameters, AttrPodName, AttrPodNamespace)
		}
	default:
		m.mode = AuthServicePrincipal
		m.clientID, m.clientSecret = strings.TrimSpace(sec["clientid"]), strings.TrimSpace(sec["clientsecret"])
		if m.clientID == "" || m.clientSecret == "" {
			return nil, fmt.Errorf("%w: no identity: set clientID (workload identity), useVMManagedIdentity or usePodIdentity, or give a nodePublishSecretRef with clientid and clientsecret", ErrInvalidParameters)
		}
	}
	m.objects, err = ParseObjects(attrib["objects"])
	if err != nil {
		return nil, err
	}
	return m, nil
}

func parseBool(attrib map[string]string, key string) (bool, error) {
	v := strings.TrimSpace(attrib[key])
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s %q is not true or false", ErrInvalidParameters, key, v)
	}
	return b, nil
}

// exchangeToken picks the token for TokenExchangeAudience from the driver's
// serviceAccount.tokens attribute: JSON {"AUDIENCE": {"token": "...", "expirationTimestamp": "..."}}.
func exchangeToken(tokens string) (string, error) {
	if strings.TrimSpace(tokens) == "" {
		return "", fmt.Errorf("%w: clientID is set but the request has no service-account token: add the audience %s to the CSIDriver's tokenRequests", ErrInvalidParameters, TokenExchangeAudience)
	}
	var m map[string]struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(tokens), &m); err != nil {
		return "", fmt.Errorf("%w: %s is not JSON keyed by audience", ErrInvalidParameters, AttrSATokens)
	}
	t := m[TokenExchangeAudience].Token
	if t == "" {
		return "", fmt.Errorf("%w: no service-account token for the audience %s", ErrInvalidParameters, TokenExchangeAudience)
	}
	return t, nil
}
