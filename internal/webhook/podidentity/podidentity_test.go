package podidentity_test

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/webhook/podidentity"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

// The check runs against a real kube-apiserver: its RBAC answers the SubjectAccessReviews.
func TestOnlyUsersOfABindingMayLabelPodsWithItsSelector(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	scheme := podidentitytest.Scheme(t)
	kc, err := client.New(cp.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "adm"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "id"}, Spec: aadv1.AzureIdentitySpec{ClientID: "c", ResourceID: "/r"}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bind"}, Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "id", Selector: "web"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "use-bind"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"aadpodidentity.k8s.io"}, Resources: []string{"azureidentitybindings"}, ResourceNames: []string{"bind"}, Verbs: []string{podidentity.UseVerb}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "use-bind"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "use-bind"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice", APIGroup: "rbac.authorization.k8s.io"}, {Kind: "ServiceAccount", Name: "trusted", Namespace: ns}}},
	} {
		if err := kc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	v := &podidentity.Validator{Reader: kc, Client: kc, Decoder: admission.NewDecoder(scheme)}
	pod := func(sa, label string) *corev1.Pod {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: corev1.PodSpec{ServiceAccountName: sa}}
		if label != "" {
			p.Labels = map[string]string{aadv1.PodLabel: label}
		}
		return p
	}
	raw := func(p *corev1.Pod) runtime.RawExtension {
		b, _ := json.Marshal(p)
		return runtime.RawExtension{Raw: b}
	}
	review := func(op admissionv1.Operation, user string, p, old *corev1.Pod) admission.Response {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: ns, Operation: op,
			UserInfo: authenticationv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}}, Object: raw(p)}}
		if old != nil {
			req.OldObject = raw(old)
		}
		return v.Handle(ctx, req)
	}
	for _, tc := range []struct {
		name    string
		op      admissionv1.Operation
		user    string
		pod     *corev1.Pod
		old     *corev1.Pod
		allowed bool
	}{
		{"a user without use creates a labelled pod", admissionv1.Create, "mallory", pod("", "web"), nil, false},
		{"a user with use creates it", admissionv1.Create, "alice", pod("", "web"), nil, true},
		{"the pod's service account may use it", admissionv1.Create, "system:serviceaccount:kube-system:replicaset-controller", pod("trusted", "web"), nil, true},
		{"a pod labels itself", admissionv1.Update, "system:serviceaccount:adm:default", pod("", "web"), pod("", ""), false},
		{"a label that selects no binding", admissionv1.Create, "mallory", pod("", "nothing"), nil, true},
		{"no label", admissionv1.Create, "mallory", pod("", ""), nil, true},
		{"an update keeping the label", admissionv1.Update, "mallory", pod("", "web"), pod("", "web"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := review(tc.op, tc.user, tc.pod, tc.old)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v (%v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			if !tc.allowed && (resp.Result == nil || !strings.Contains(resp.Result.Message, "adm/bind")) {
				t.Fatalf("denial does not name the binding: %+v", resp.Result)
			}
		})
	}
}
