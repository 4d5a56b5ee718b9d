package workloadidentity

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPatchIsTheMutation checks that the handler's patch, built from the part of the pod it
// decodes, turns the pod kube-apiserver sends into exactly what Mutate makes of the whole pod:
// fields it does not decode (ephemeral containers, resources, other volumes' sources) survive,
// and what it appends lands at the right index, also when the proxy's containers shift the
// init containers. The patch is applied with the JSON patch library kube-apiserver applies it with.
func TestPatchIsTheMutation(t *testing.T) {
	withImages := Config{TenantID: defaultTenant, AuthorityHost: localHost, ProxyImage: "proxy:1", ProxyInitImage: "proxy-init:1"}
	minimal := func() *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "p-", Labels: map[string]string{UseLabel: "true"}}}
		p.Spec.ServiceAccountName = "app"
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
		return p
	}
	realistic := func(annotations map[string]string) *corev1.Pod {
		p := apiServerPod()
		p.Annotations = annotations
		return p
	}
	tests := map[string]struct {
		pod       *corev1.Pod
		cfg       Config
		saAnn     map[string]string
		unchanged bool
	}{
		"minimal: no env, mounts, volumes or init containers":              {pod: minimal()},
		"realistic: init container, env, mounts and volumes already there": {pod: realistic(nil)},
		"no client id: the other variables only":                           {pod: realistic(nil), saAnn: map[string]string{}},
		"skipped containers":                                               {pod: realistic(map[string]string{SkipContainersAnnotation: "metrics;migrate"})},
		"variables and mounts the pod sets itself are kept": {pod: func() *corev1.Pod {
			p := realistic(nil)
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: ClientIDEnv, Value: "mine"})
			p.Spec.Containers[1].VolumeMounts = append(p.Spec.Containers[1].VolumeMounts, corev1.VolumeMount{Name: "own", MountPath: TokenMountPath})
			return p
		}()},
		"a projected token at the path already: no second volume": {pod: func() *corev1.Pod {
			p := realistic(nil)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "own-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "mine", Path: TokenVolume}}}}}})
			return p
		}()},
		"ephemeral containers and status survive untouched": {pod: func() *corev1.Pod {
			p := realistic(nil)
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox", Env: []corev1.EnvVar{{Name: "X", Value: "y"}}}}}
			p.Status.Phase = corev1.PodPending
			return p
		}()},
		"fully mutated already: no patch": {pod: func() *corev1.Pod {
			p := realistic(nil)
			if _, err := Mutate(p, sa(map[string]string{ClientIDAnnotation: clientID}), cfg); err != nil {
				t.Fatal(err)
			}
			return p
		}(), unchanged: true},
		"proxy: sidecar in front of existing init containers, its init at the end": {
			pod: realistic(map[string]string{InjectProxyAnnotation: "true", ProxyPortAnnotation: "8100"}), cfg: withImages},
		"proxy: no init containers before": {pod: func() *corev1.Pod {
			p := minimal()
			p.Annotations = map[string]string{InjectProxyAnnotation: "true"}
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SSL_CERT_FILE", Value: "/etc/ca/ca.crt"}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ca"}}
			return p
		}(), cfg: withImages},
		"proxy: the pod has a sidecar of that name already, not first": {pod: func() *corev1.Pod {
			p := realistic(map[string]string{InjectProxyAnnotation: "true"})
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: ProxySidecarContainerName, Image: "own-proxy"})
			return p
		}(), cfg: withImages},
		"proxy: skipped sidecar": {pod: realistic(map[string]string{InjectProxyAnnotation: "true", SkipContainersAnnotation: ProxySidecarContainerName}), cfg: withImages},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.cfg == (Config{}) {
				tc.cfg = cfg
			}
			if tc.saAnn == nil {
				tc.saAnn = map[string]string{ClientIDAnnotation: clientID}
			}
			account := sa(tc.saAnn)
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			// What Mutate makes of the whole pod, as the handler used to compute it.
			want := &corev1.Pod{}
			if err := json.Unmarshal(raw, want); err != nil {
				t.Fatal(err)
			}
			wantWarnings, err := Mutate(want, account, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}

			h := &Handler{Reader: saReader{sa: account}, Config: tc.cfg}
			resp := serve(t, h, admissionv1.Create, string(raw))
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			if tc.unchanged != (len(resp.Patch) == 0) || (resp.PatchType != nil) != (len(resp.Patch) > 0) {
				t.Fatalf("patch %s (type %v), want a patch: %v", resp.Patch, resp.PatchType, !tc.unchanged)
			}
			if !slices.Equal(resp.Warnings, wantWarnings) {
				t.Errorf("warnings %q, want %q", resp.Warnings, wantWarnings)
			}
			ops := resp.Patch
			if tc.unchanged {
				ops = []byte("[]")
			}
			p, err := jsonpatch.DecodePatch(ops)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := p.Apply(raw)
			if err != nil {
				t.Fatalf("apply %s: %v", ops, err)
			}
			got := &corev1.Pod{}
			if err := json.Unmarshal(patched, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("patched pod\n%s\nwant\n%s\npatch %s", g, w, ops)
			}
		})
	}
}

// TestRefusalsAndPassThrough: what the handler does not mutate, it allows unchanged or refuses
// with the reason, from the decoded part of the pod as from the whole.
func TestRefusalsAndPassThrough(t *testing.T) {
	account := sa(map[string]string{ClientIDAnnotation: clientID})
	h := &Handler{Reader: saReader{sa: account}, Config: Config{TenantID: defaultTenant, ProxyImage: "proxy:1", ProxyInitImage: "proxy-init:1"}}
	for name, tc := range map[string]struct {
		raw     string
		op      admissionv1.Operation
		allowed bool
		code    int32
		msg     string
	}{
		"unlabelled":       {raw: `{"metadata":{"labels":{"app":"x"}},"spec":{"serviceAccountName":"app","containers":[{"name":"a"}]}}`, allowed: true},
		"label false":      {raw: `{"metadata":{"labels":{"azure.workload.identity/use":"false"}},"spec":{"containers":[{"name":"a"}]}}`, allowed: true},
		"an update":        {raw: `{}`, op: admissionv1.Update, allowed: true},
		"not JSON":         {raw: `{"metadata":`, code: 400, msg: "decode the admission review"},
		"labels not a map": {raw: `{"metadata":{"labels":5},"spec":{"containers":[{"name":"a"}]}}`, code: 400, msg: "decode the admission review"},
		"missing SA":       {raw: `{"metadata":{"labels":{"azure.workload.identity/use":"true"}},"spec":{"serviceAccountName":"other","containers":[{"name":"a"}]}}`, code: 400, msg: "service account ns/other not found"},
		"hostNetwork":      {raw: `{"metadata":{"labels":{"azure.workload.identity/use":"true"},"annotations":{"azure.workload.identity/inject-proxy-sidecar":"true"}},"spec":{"serviceAccountName":"app","hostNetwork":true,"containers":[{"name":"a"}]}}`, code: 403, msg: "hostNetwork"},
		"bad duration":     {raw: `{"metadata":{"labels":{"azure.workload.identity/use":"true"},"annotations":{"azure.workload.identity/service-account-token-expiration":"5"}},"spec":{"serviceAccountName":"app","containers":[{"name":"a"}]}}`, code: 403, msg: "want whole seconds"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.op == "" {
				tc.op = admissionv1.Create
			}
			resp := serve(t, h, tc.op, tc.raw)
			if resp.Allowed != tc.allowed || len(resp.Patch) != 0 {
				t.Fatalf("allowed %v patch %s, want allowed %v and no patch", resp.Allowed, resp.Patch, tc.allowed)
			}
			if !tc.allowed && (resp.Result == nil || resp.Result.Code != tc.code || !strings.Contains(resp.Result.Message, tc.msg)) {
				t.Errorf("result %+v, want %d with %q", resp.Result, tc.code, tc.msg)
			}
		})
	}
}
