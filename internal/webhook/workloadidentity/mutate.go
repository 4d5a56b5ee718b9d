// Package workloadidentity is the workload identity admission webhook: a pod labelled
// azure.workload.identity/use=true gets its service account's Azure identity as environment
// variables and a projected service-account token for Entra ID's token exchange, exactly as the
// Azure Workload Identity webhook does, so users' pods and service accounts work unchanged.
package workloadidentity

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The labels, annotations, variables and paths of the AKS convention (users rely on every one).
const (
	UseLabel                   = "azure.workload.identity/use"
	ClientIDAnnotation         = "azure.workload.identity/client-id"
	TenantIDAnnotation         = "azure.workload.identity/tenant-id"
	TokenExpirationAnnotation  = "azure.workload.identity/service-account-token-expiration" //nolint:gosec // a name, not a credential
	SkipContainersAnnotation   = "azure.workload.identity/skip-containers"
	InjectProxyAnnotation      = "azure.workload.identity/inject-proxy-sidecar"
	ProxyPortAnnotation        = "azure.workload.identity/proxy-sidecar-port"
	ClientIDEnv                = "AZURE_CLIENT_ID"
	TenantIDEnv                = "AZURE_TENANT_ID"
	TokenFileEnv               = "AZURE_FEDERATED_TOKEN_FILE" //nolint:gosec // a name, not a credential
	AuthorityHostEnv           = "AZURE_AUTHORITY_HOST"
	TokenVolume                = "azure-identity-token"
	TokenMountPath             = "/var/run/secrets/azure/tokens"      //nolint:gosec // a path, not a credential
	TokenFile                  = TokenMountPath + "/" + TokenVolume   //nolint:gosec // a path, not a credential
	DefaultAudience            = "api://AzureADTokenExchange"         //nolint:gosec // an audience, not a credential
	DefaultAuthorityHost       = "https://login.microsoftonline.com/" //nolint:gosec // Azure's public authority
	MinTokenExpiration         = int64(3600)
	MaxTokenExpiration         = int64(86400)
	DefaultTokenExpiration     = int64(3600)
	DefaultProxyPort           = int32(8000)
	ProxyInitContainerName     = "azwi-proxy-init"
	ProxySidecarContainerName  = "azwi-proxy"
	proxyPortEnv               = "PROXY_PORT"
	defaultProjectedVolumeMode = int32(0o644)
)

// ErrInvalid reports a pod or service account whose annotations cannot be honoured; the pod is
// refused with the message.
var ErrInvalid = errors.New("invalid workload identity settings")

// Config is the webhook's side of the mutation: defaults from the manager's settings.
type Config struct {
	// TenantID is AZURE_TENANT_ID when the service account names none.
	TenantID string
	// AuthorityHost is AZURE_AUTHORITY_HOST; empty means Azure's public cloud.
	AuthorityHost string
	// Audience of the projected token; empty means api://AzureADTokenExchange.
	Audience string
	// ProxyImage and ProxyInitImage are the upstream proxy's images for pods that ask for the
	// proxy sidecar (both or neither: SetProxyImages); when empty such pods are mutated without
	// it and get a warning.
	ProxyImage     string
	ProxyInitImage string
}

func (c Config) audience() string {
	if c.Audience == "" {
		return DefaultAudience
	}
	return c.Audience
}

func (c Config) authorityHost() string {
	if c.AuthorityHost == "" {
		return DefaultAuthorityHost
	}
	return c.AuthorityHost
}

// Settings are what the pod and its service account ask for, parsed and checked.
type Settings struct {
	ClientID        string // empty: no client-id annotation
	TenantID        string // empty: the webhook's default
	TokenExpiration int64
	SkipContainers  map[string]bool
	InjectProxy     bool
	ProxyPort       int32
}

// ParseSettings reads the annotations of a pod and of its service account. The pod's token
// expiration wins over the service account's; an unparsable or out-of-bounds value is an error
// wrapping ErrInvalid, as upstream refuses it.
func ParseSettings(podAnnotations, saAnnotations map[string]string) (Settings, error) {
	s := Settings{
		ClientID:        strings.TrimSpace(saAnnotations[ClientIDAnnotation]),
		TenantID:        strings.TrimSpace(saAnnotations[TenantIDAnnotation]),
		TokenExpiration: DefaultTokenExpiration,
		ProxyPort:       DefaultProxyPort,
	}
	expiration, from := podAnnotations[TokenExpirationAnnotation], "pod"
	if expiration == "" {
		expiration, from = saAnnotations[TokenExpirationAnnotation], "service account"
	}
	if expiration != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(expiration), 10, 64)
		if err != nil || n < MinTokenExpiration || n > MaxTokenExpiration {
			return Settings{}, fmt.Errorf("%w: %s annotation %s=%q: want whole seconds from %d to %d",
				ErrInvalid, from, TokenExpirationAnnotation, expiration, MinTokenExpiration, MaxTokenExpiration)
		}
		s.TokenExpiration = n
	}
	if v := podAnnotations[SkipContainersAnnotation]; v != "" {
		s.SkipContainers = map[string]bool{}
		for name := range strings.SplitSeq(v, ";") {
			if name = strings.TrimSpace(name); name != "" {
				s.SkipContainers[name] = true
			}
		}
	}
	if _, ok := podAnnotations[InjectProxyAnnotation]; ok {
		s.InjectProxy = true
		if v, ok := podAnnotations[ProxyPortAnnotation]; ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || n < 1 || n > 65535 {
				return Settings{}, fmt.Errorf("%w: pod annotation %s=%q: want a port from 1 to 65535", ErrInvalid, ProxyPortAnnotation, v)
			}
			s.ProxyPort = int32(n)
		}
	}
	return s, nil
}

// Mutate gives pod the identity of sa: the AZURE_* variables (AZURE_CLIENT_ID only when sa has
// the client-id annotation) and the token mount in every container and init container not
// skipped, and the projected token volume. Whatever the pod already sets is left alone, so a
// second call changes nothing. It returns admission warnings; on error pod is unchanged.
func Mutate(pod *corev1.Pod, sa *corev1.ServiceAccount, cfg Config) ([]string, error) {
	s, err := ParseSettings(pod.Annotations, sa.Annotations)
	if err != nil {
		return nil, err
	}
	var warnings []string
	injectProxy := false
	if s.InjectProxy {
		switch {
		case pod.Spec.HostNetwork:
			return nil, fmt.Errorf("%w: the proxy sidecar (%s) cannot run in a pod with hostNetwork", ErrInvalid, InjectProxyAnnotation)
		case cfg.ProxyImage == "" || cfg.ProxyInitImage == "":
			warnings = append(warnings, fmt.Sprintf("%s: no proxy image is configured (the manager's --proxy-image and --proxy-init-image), so no proxy sidecar was injected; "+
				"the pod still gets the AZURE_* variables and the token file for an SDK with workload identity support", InjectProxyAnnotation))
		default:
			injectProxy = true
		}
	}
	tenantID := s.TenantID
	if tenantID == "" {
		tenantID = cfg.TenantID
	}
	if s.ClientID == "" {
		warnings = append(warnings, fmt.Sprintf("service account %s/%s has no %s annotation: AZURE_CLIENT_ID is not injected, "+
			"so the application must set the client id itself", sa.Namespace, sa.Name, ClientIDAnnotation))
	}
	env := []corev1.EnvVar{
		{Name: ClientIDEnv, Value: s.ClientID},
		{Name: TenantIDEnv, Value: tenantID},
		{Name: TokenFileEnv, Value: TokenFile},
		{Name: AuthorityHostEnv, Value: cfg.authorityHost()},
	}

	if injectProxy {
		pod.Spec.InitContainers = addProxyInit(pod.Spec.InitContainers, cfg.ProxyInitImage, s.ProxyPort)
		pod.Spec.InitContainers = addProxySidecar(pod.Spec.InitContainers, cfg.ProxyImage, s.ProxyPort, appContainer(pod))
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if s.SkipContainers[cs[i].Name] {
				continue
			}
			addEnv(&cs[i], env)
			addMount(&cs[i])
		}
	}
	addVolume(pod, s.TokenExpiration, cfg.audience())
	return warnings, nil
}

// addEnv appends the variables the container does not set; empty values are not set at all.
func addEnv(c *corev1.Container, env []corev1.EnvVar) {
	for _, e := range env {
		if e.Value == "" || hasEnv(c, e.Name) {
			continue
		}
		c.Env = append(c.Env, e)
	}
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// addMount mounts the token volume unless the container mounts that volume, or anything at the
// token's path, already.
func addMount(c *corev1.Container) {
	for _, m := range c.VolumeMounts {
		if m.Name == TokenVolume || m.MountPath == TokenMountPath {
			return
		}
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: TokenVolume, MountPath: TokenMountPath, ReadOnly: true})
}

// addVolume adds the projected token volume unless the pod has a volume of that name or a
// projected token at that path already.
func addVolume(pod *corev1.Pod, expiration int64, audience string) {
	for _, v := range pod.Spec.Volumes {
		if v.Name == TokenVolume {
			return
		}
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil && src.ServiceAccountToken.Path == TokenVolume {
				return
			}
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: TokenVolume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: audience, ExpirationSeconds: ptr.To(expiration), Path: TokenVolume,
			}}},
			// kube-apiserver's default, set here so that a reinvocation sees no difference.
			DefaultMode: ptr.To(defaultProjectedVolumeMode),
		}},
	})
}

func hasContainer(cs []corev1.Container, name string) bool {
	for _, c := range cs {
		if c.Name == name {
			return true
		}
	}
	return false
}

// addProxyInit adds upstream's proxy init container (it redirects IMDS traffic to the sidecar).
func addProxyInit(cs []corev1.Container, image string, port int32) []corev1.Container {
	if hasContainer(cs, ProxyInitContainerName) {
		return cs
	}
	return append(cs, corev1.Container{
		Name:            ProxyInitContainerName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		SecurityContext: &corev1.SecurityContext{
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}},
			Privileged:   ptr.To(true),
			RunAsNonRoot: ptr.To(false),
			RunAsUser:    ptr.To[int64](0),
		},
		Env: []corev1.EnvVar{{Name: proxyPortEnv, Value: strconv.Itoa(int(port))}},
	})
}

// proxyReachEnv are the variables that decide how a process reaches Entra ID: the authority,
// an egress proxy, the CAs it trusts.
var proxyReachEnv = []string{AuthorityHostEnv, "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR"}

// appContainer is the pod's first container, the app the sidecar gets tokens for; nil if none.
func appContainer(pod *corev1.Pod) *corev1.Container {
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	return &pod.Spec.Containers[0]
}

// reachLikeApp is what the sidecar takes from the app so that it reaches Entra ID as the app
// would: the app's proxyReachEnv variables, and read-only the app's mounts that hold the files
// SSL_CERT_FILE and SSL_CERT_DIR name (a CA of an egress proxy or a private cloud). Upstream's
// sidecar takes none of them, so behind a proxy or with a private CA it cannot get a token.
func reachLikeApp(app *corev1.Container) ([]corev1.EnvVar, []corev1.VolumeMount) {
	if app == nil {
		return nil, nil
	}
	var env []corev1.EnvVar
	var files []string
	for _, e := range app.Env {
		if !slices.Contains(proxyReachEnv, e.Name) {
			continue
		}
		env = append(env, *e.DeepCopy())
		if (e.Name == "SSL_CERT_FILE" || e.Name == "SSL_CERT_DIR") && e.Value != "" {
			files = append(files, path.Clean(e.Value))
		}
	}
	var mounts []corev1.VolumeMount
	for _, m := range app.VolumeMounts {
		dir := path.Clean(m.MountPath)
		for _, f := range files {
			if f == dir || strings.HasPrefix(f, strings.TrimSuffix(dir, "/")+"/") {
				m := *m.DeepCopy()
				m.ReadOnly = true
				mounts = append(mounts, m)
				break
			}
		}
	}
	return env, mounts
}

// addProxySidecar adds upstream's proxy as a native sidecar (an init container that keeps
// running), first among the init containers, as upstream does on Kubernetes 1.32 and later.
// It reaches Entra ID as app does (reachLikeApp).
func addProxySidecar(cs []corev1.Container, image string, port int32, app *corev1.Container) []corev1.Container {
	if hasContainer(cs, ProxySidecarContainerName) {
		return cs
	}
	env, mounts := reachLikeApp(app)
	portArg := fmt.Sprintf("--proxy-port=%d", port)
	return append([]corev1.Container{{
		Name:            ProxySidecarContainerName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            []string{portArg, "--log-level=info"},
		Env:             env,
		VolumeMounts:    mounts,
		Ports:           []corev1.ContainerPort{{ContainerPort: port}},
		Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{"/proxy", portArg, "--probe", "--log-level=info"},
		}}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			Privileged:               ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
		},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
	}}, cs...)
}
