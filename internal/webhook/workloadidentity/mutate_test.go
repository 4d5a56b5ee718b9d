package workloadidentity

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cerulean/cerulean/internal/webhook/registration"
)

const (
	clientID      = "11111111-2222-3333-4444-555555555555"
	saTenant      = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	defaultTenant = "99999999-8888-7777-6666-555555555555"
	localHost     = "https://127.0.0.1:8443/"
)

var cfg = Config{TenantID: defaultTenant, AuthorityHost: localHost}

func sa(annotations map[string]string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Annotations: annotations}}
}

func pod(annotations map[string]string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{UseLabel: "true"}, Annotations: annotations}}
	p.Spec.ServiceAccountName = "app"
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "app"})
	}
	return p
}

func env(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		if _, dup := m[e.Name]; dup {
			m[e.Name] = "DUPLICATE"
			continue
		}
		m[e.Name] = e.Value
	}
	return m
}

func tokenVolume(t *testing.T, p *corev1.Pod) *corev1.ServiceAccountTokenProjection {
	t.Helper()
	var found *corev1.ServiceAccountTokenProjection
	for _, v := range p.Spec.Volumes {
		if v.Name == TokenVolume {
			if found != nil {
				t.Fatal("two token volumes")
			}
			if v.Projected == nil || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil {
				t.Fatalf("token volume is not a projected service-account token: %+v", v)
			}
			found = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	return found
}

func mounts(c corev1.Container) []corev1.VolumeMount {
	var ms []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.Name == TokenVolume || m.MountPath == TokenMountPath {
			ms = append(ms, m)
		}
	}
	return ms
}

func TestMutate(t *testing.T) {
	full := map[string]string{ClientIDEnv: clientID, TenantIDEnv: defaultTenant, TokenFileEnv: "/var/run/secrets/azure/tokens/azure-identity-token", AuthorityHostEnv: localHost}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		sa         *corev1.ServiceAccount
		cfg        Config
		wantEnv    map[string]map[string]string // container → env; a container absent here must have no AZURE_* env
		wantExp    int64
		wantWarn   string
		wantErr    string
		wantMounts map[string]string // container → the token mount's path (default: the token path, read-only)
	}{{
		name:    "every container and init container gets env, mount and volume",
		pod:     pod(nil, "app", "helper"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID}),
		cfg:     cfg,
		wantEnv: map[string]map[string]string{"init": full, "app": full, "helper": full},
		wantExp: 3600,
	}, {
		name: "the service account's tenant wins over the webhook's",
		pod:  pod(nil, "app"),
		sa:   sa(map[string]string{ClientIDAnnotation: clientID, TenantIDAnnotation: saTenant}),
		cfg:  cfg,
		wantEnv: map[string]map[string]string{
			"init": with(full, TenantIDEnv, saTenant), "app": with(full, TenantIDEnv, saTenant),
		},
		wantExp: 3600,
	}, {
		name:    "no authority host configured means Azure's public one",
		pod:     pod(nil, "app"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID}),
		cfg:     Config{TenantID: defaultTenant},
		wantEnv: map[string]map[string]string{"init": with(full, AuthorityHostEnv, "https://login.microsoftonline.com/"), "app": with(full, AuthorityHostEnv, "https://login.microsoftonline.com/")},
		wantExp: 3600,
	}, {
		name:    "the service account's expiration",
		pod:     pod(nil, "app"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID, TokenExpirationAnnotation: "7200"}),
		cfg:     cfg,
		wantEnv: map[string]map[string]string{"init": full, "app": full},
		wantExp: 7200,
	}, {
		name:    "the pod's expiration wins over the service account's",
		pod:     pod(map[string]string{TokenExpirationAnnotation: "86400"}, "app"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID, TokenExpirationAnnotation: "7200"}),
		cfg:     cfg,
		wantEnv: map[string]map[string]string{"init": full, "app": full},
		wantExp: 86400,
	}, {
		name:    "the lower bound is allowed",
		pod:     pod(map[string]string{TokenExpirationAnnotation: "3600"}, "app"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID}),
		cfg:     cfg,
		wantEnv: map[string]map[string]string{"init": full, "app": full},
		wantExp: 3600,
	}, {
		name:    "below the bounds is refused",
		pod:     pod(map[string]string{TokenExpirationAnnotation: "3599"}, "app"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID}),
		cfg:     cfg,
		wantErr: `pod annotation azure.workload.identity/service-account-token-expiration="3599": want whole seconds from 3600 to 86400`,
	}, {
		name:    "above the bounds on the service account is refused",
		pod:     pod(nil, "app"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID, TokenExpirationAnnotation: "86401"}),
		cfg:     cfg,
		wantErr: `service account annotation azure.workload.identity/service-account-token-expiration="86401"`,
	}, {
		name:    "a non-number is refused",
		pod:     pod(map[string]string{TokenExpirationAnnotation: "1h"}, "app"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID}),
		cfg:     cfg,
		wantErr: `="1h"`,
	}, {
		name:    "skipped containers are left alone, names trimmed",
		pod:     pod(map[string]string{SkipContainersAnnotation: "init; helper"}, "app", "helper"),
		sa:      sa(map[string]string{ClientIDAnnotation: clientID}),
		cfg:     cfg,
		wantEnv: map[string]map[string]string{"app": full},
		wantExp: 3600,
	}, {
		name:     "without the client-id annotation: everything but AZURE_CLIENT_ID, and a warning",
		pod:      pod(nil, "app"),
		sa:       sa(nil),
		cfg:      cfg,
		wantEnv:  map[string]map[string]string{"init": without(full, ClientIDEnv), "app": without(full, ClientIDEnv)},
		wantExp:  3600,
		wantWarn: "service account ns/app has no azure.workload.identity/client-id annotation",
	}, {
		name: "env vars, mounts and volumes the pod sets are left alone",
		pod: func() *corev1.Pod {
			p := pod(nil, "app", "other")
			p.Spec.Containers[0].Env = []corev1.EnvVar{
				{Name: ClientIDEnv, Value: "mine"},
				{Name: AuthorityHostEnv, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}},
			}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: TokenMountPath}}
			p.Spec.Volumes = []corev1.Volume{{Name: TokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "mine", ExpirationSeconds: ptr.To[int64](600), Path: TokenVolume}}},
			}}}}
			return p
		}(),
		sa:  sa(map[string]string{ClientIDAnnotation: clientID}),
		cfg: cfg,
		wantEnv: map[string]map[string]string{
			"init": full, "other": full,
			"app": with(full, ClientIDEnv, "mine", AuthorityHostEnv, ""),
		},
		wantExp:    600,
		wantMounts: map[string]string{"app": "mine"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pod.DeepCopy()
			warnings, err := Mutate(p, tc.sa, tc.cfg)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrInvalid with %q", err, tc.wantErr)
				}
				if !reflect.DeepEqual(p, tc.pod) {
					t.Error("a refused pod was changed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(warnings, "\n"); !strings.Contains(got, tc.wantWarn) || (tc.wantWarn == "") != (got == "") {
				t.Errorf("warnings %q, want %q", warnings, tc.wantWarn)
			}
			for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
				want, mutated := tc.wantEnv[c.Name]
				got := env(c)
				if !mutated {
					for k := range got {
						if strings.HasPrefix(k, "AZURE_") {
							t.Errorf("container %s: %s injected into a skipped container", c.Name, k)
						}
					}
					if len(mounts(c)) != 0 {
						t.Errorf("container %s: token mounted into a skipped container", c.Name)
					}
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("container %s env\n got %v\nwant %v", c.Name, got, want)
				}
				ms := mounts(c)
				wantName := TokenVolume
				if n, ok := tc.wantMounts[c.Name]; ok {
					wantName = n
				}
				if len(ms) != 1 || ms[0].Name != wantName || ms[0].MountPath != TokenMountPath || (wantName == TokenVolume && !ms[0].ReadOnly) {
					t.Errorf("container %s token mounts %+v", c.Name, ms)
				}
			}
			v := tokenVolume(t, p)
			if v == nil {
				t.Fatal("no token volume")
			}
			if *v.ExpirationSeconds != tc.wantExp || v.Path != TokenVolume {
				t.Errorf("token volume %+v, want expiration %d", v, tc.wantExp)
			}
			if tc.wantExp != 600 && v.Audience != DefaultAudience {
				t.Errorf("token audience %q", v.Audience)
			}

			// Reinvocation (reinvocationPolicy IfNeeded) changes nothing.
			again := p.DeepCopy()
			if _, err := Mutate(again, tc.sa, tc.cfg); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, p) {
				t.Error("a second mutation changed the pod")
			}
		})
	}
}

// The sidecar gets tokens for the app, so it reaches Entra ID as the app does: the app's
// authority host, proxy and CA variables, and read-only the mounts holding the CA files.
func TestProxySidecarReachesEntraLikeTheApp(t *testing.T) {
	withImages := Config{TenantID: defaultTenant, ProxyImage: "proxy:1", ProxyInitImage: "proxy-init:1"}
	p := pod(map[string]string{InjectProxyAnnotation: "true"}, "app", "other")
	p.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "HTTPS_PROXY", Value: "http://10.244.0.1:3128"}, {Name: "NO_PROXY", Value: ".svc"},
		{Name: "SSL_CERT_FILE", Value: "/etc/cloud-ca/ca.crt"}, {Name: AuthorityHostEnv, Value: "https://login.microsoftonline.com/"},
		{Name: "SSL_CERT_DIR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "dir"}}},
		{Name: "APP_SETTING", Value: "x"},
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "cloud-ca", MountPath: "/etc/cloud-ca/"}, {Name: "data", MountPath: "/data"}, {Name: "etc", MountPath: "/etc/cloud"},
	}
	p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "HTTP_PROXY", Value: "http://elsewhere"}}
	if _, err := Mutate(p, sa(map[string]string{ClientIDAnnotation: clientID}), withImages); err != nil {
		t.Fatal(err)
	}
	side := p.Spec.InitContainers[0]
	got := env(side)
	for k, want := range map[string]string{"HTTPS_PROXY": "http://10.244.0.1:3128", "NO_PROXY": ".svc", "SSL_CERT_FILE": "/etc/cloud-ca/ca.crt",
		AuthorityHostEnv: "https://login.microsoftonline.com/", ClientIDEnv: clientID, "SSL_CERT_DIR": "", "APP_SETTING": "<unset>", "HTTP_PROXY": "<unset>"} {
		v, ok := got[k]
		if !ok {
			v = "<unset>"
		}
		if v != want {
			t.Errorf("sidecar %s = %q, want %q (env %v)", k, v, want, side.Env)
		}
	}
	var mounts []string
	for _, m := range side.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("sidecar mount %s is writable", m.Name)
		}
		mounts = append(mounts, m.Name)
	}
	if want := []string{"cloud-ca", TokenVolume}; !reflect.DeepEqual(mounts, want) {
		t.Errorf("sidecar mounts %v, want %v", mounts, want)
	}
	if p.Spec.Containers[0].VolumeMounts[0].ReadOnly {
		t.Error("the app's own mount was changed")
	}
}

func TestMutateProxySidecar(t *testing.T) {
	withImages := Config{TenantID: defaultTenant, ProxyImage: "proxy:1", ProxyInitImage: "proxy-init:1"}
	p := pod(map[string]string{InjectProxyAnnotation: "true", ProxyPortAnnotation: "8100"}, "app")
	if _, err := Mutate(p, sa(map[string]string{ClientIDAnnotation: clientID}), withImages); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name)
	}
	if want := []string{ProxySidecarContainerName, "init", ProxyInitContainerName}; !reflect.DeepEqual(names, want) {
		t.Fatalf("init containers %v, want %v", names, want)
	}
	side := p.Spec.InitContainers[0]
	if side.RestartPolicy == nil || *side.RestartPolicy != corev1.ContainerRestartPolicyAlways || side.Ports[0].ContainerPort != 8100 || side.Args[0] != "--proxy-port=8100" {
		t.Errorf("sidecar %+v", side)
	}
	if env(p.Spec.InitContainers[2])[proxyPortEnv] != "8100" {
		t.Errorf("proxy init env %v", p.Spec.InitContainers[2].Env)
	}
	again := p.DeepCopy()
	if _, err := Mutate(again, sa(map[string]string{ClientIDAnnotation: clientID}), withImages); err != nil || !reflect.DeepEqual(again, p) {
		t.Errorf("second mutation with the proxy: err=%v, changed=%v", err, !reflect.DeepEqual(again, p))
	}

	// Without settings of the app's own, the sidecar gets the webhook's authority host and
	// nothing else.
	if got := env(side); got[AuthorityHostEnv] != DefaultAuthorityHost || got["HTTPS_PROXY"] != "" || len(side.VolumeMounts) != 1 {
		t.Errorf("sidecar env %v mounts %v", got, side.VolumeMounts)
	}

	noImages := pod(map[string]string{InjectProxyAnnotation: "true"}, "app")
	warnings, err := Mutate(noImages, sa(map[string]string{ClientIDAnnotation: clientID}), cfg)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "no proxy sidecar was injected") || len(noImages.Spec.InitContainers) != 1 {
		t.Errorf("without images: warnings %q err %v init containers %d", warnings, err, len(noImages.Spec.InitContainers))
	}

	for name, p := range map[string]*corev1.Pod{
		"port": pod(map[string]string{InjectProxyAnnotation: "true", ProxyPortAnnotation: "70000"}, "app"),
		"hostNetwork": func() *corev1.Pod {
			p := pod(map[string]string{InjectProxyAnnotation: "true"}, "app")
			p.Spec.HostNetwork = true
			return p
		}(),
	} {
		if _, err := Mutate(p, sa(nil), withImages); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestConfiguration(t *testing.T) {
	if _, err := Configuration(registration.ClientConfig{}); !errors.Is(err, registration.ErrNoEndpoint) {
		t.Errorf("no endpoint: %v", err)
	}
	c, err := Configuration(registration.ClientConfig{URL: "https://127.0.0.1:9443", CABundle: []byte("ca")})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Webhooks[0]
	if *w.ClientConfig.URL != "https://127.0.0.1:9443/mutate-v1-pod" || string(w.ClientConfig.CABundle) != "ca" ||
		*w.FailurePolicy != "Fail" || *w.ReinvocationPolicy != "IfNeeded" || *w.TimeoutSeconds > 5 ||
		w.ObjectSelector.MatchLabels[UseLabel] != "true" || w.Rules[0].Operations[0] != "CREATE" || w.Rules[0].Resources[0] != "pods" {
		t.Errorf("webhook %+v", w)
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func without(m map[string]string, key string) map[string]string {
	out := with(m)
	delete(out, key)
	return out
}

// FuzzParseSettings feeds annotation values users write: parsing never panics, accepted values
// are within bounds, and a mutation with them is idempotent.
func FuzzParseSettings(f *testing.F) {
	f.Add("3600", "", "a;b", "", "8000")
	f.Add("", "86400", " ; ;x ", "true", "0")
	f.Add("-1", "abc", "", "true", "65536")
	f.Add("+3600", "0x10", ";;", "", " 80 ")
	f.Fuzz(func(t *testing.T, podExp, saExp, skip, proxy, port string) {
		podAnn := map[string]string{TokenExpirationAnnotation: podExp, SkipContainersAnnotation: skip, ProxyPortAnnotation: port}
		if proxy != "" {
			podAnn[InjectProxyAnnotation] = proxy
		}
		saAnn := map[string]string{TokenExpirationAnnotation: saExp, ClientIDAnnotation: clientID}
		s, err := ParseSettings(podAnn, saAnn)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if s.TokenExpiration < MinTokenExpiration || s.TokenExpiration > MaxTokenExpiration {
			t.Fatalf("accepted expiration %d", s.TokenExpiration)
		}
		if s.ProxyPort < 1 {
			t.Fatalf("accepted port %d", s.ProxyPort)
		}
		for name := range s.SkipContainers {
			if name == "" || strings.TrimSpace(name) != name {
				t.Fatalf("skip name %q", name)
			}
		}
		p := pod(podAnn, "app", "b")
		if _, err := Mutate(p, sa(saAnn), Config{ProxyImage: "p", ProxyInitImage: "i"}); err != nil {
			t.Fatal(err)
		}
		again := p.DeepCopy()
		if _, err := Mutate(again, sa(saAnn), Config{ProxyImage: "p", ProxyInitImage: "i"}); err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("second mutation: err=%v changed=%v", err, !reflect.DeepEqual(again, p))
		}
	})
}
