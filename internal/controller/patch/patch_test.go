package patch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/controller/patch"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

const group = "patchtest.cerulean.dev"

// kube is a client of the real API server with a kind (Widget) that has a status subresource.
func kube(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(devenvtest.ControlPlane(t).RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	open := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &open}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
	if err := c.Create(t.Context(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		// Established, and served: a create succeeds.
		w := widget("probe")
		err := c.Create(ctx, w)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("widgets never served: %v", err)
	}
	return c
}

func widget(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(group + "/v1")
	u.SetKind("Widget")
	u.SetNamespace("default")
	u.SetName(name)
	return u
}

func cond(typ, status, reason string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason}
}

// setConditions writes status.conditions as another writer would (a user, another controller).
func setConditions(t *testing.T, c client.Client, name string, conds ...any) {
	t.Helper()
	p := map[string]any{"status": map[string]any{"conditions": conds}}
	u := widget(name)
	if err := c.Status().Patch(t.Context(), u, client.RawPatch(types.MergePatchType, mustJSON(t, p))); err != nil {
		t.Fatal(err)
	}
}

func conditionsOn(t *testing.T, c client.Client, name string) map[string]string {
	t.Helper()
	u := widget(name)
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := map[string]string{}
	for _, x := range list {
		m := x.(map[string]any)
		out[m["type"].(string)] = m["status"].(string) + "/" + m["reason"].(string)
	}
	return out
}

// A condition another writer sets between the controller's read and its patch survives the
// patch, and the condition the controller owns is the controller's, whether the patch also
// changes metadata (the server's answer carries the foreign condition) or only status (a
// Conflict, read again and merged).
func TestOwnedConditionsKeepOthers(t *testing.T) {
	c := kube(t)
	for _, tc := range []struct {
		name     string
		metadata bool
	}{{"status only", false}, {"metadata and status", true}} {
		t.Run(tc.name, func(t *testing.T) {
			name := map[bool]string{false: "status-only", true: "with-metadata"}[tc.metadata]
			if err := c.Create(t.Context(), widget(name)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), widget(name)) })
			setConditions(t, c, name, cond("Ready", "False", "Creating"), cond("Early", "True", "User"))

			// The controller reads.
			obj := widget(name)
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatal(err)
			}
			h, err := patch.New(c, obj, patch.WithOwnedConditions("Ready"))
			if err != nil {
				t.Fatal(err)
			}
			// Another writer, between the read and the patch: a condition of its own, and a
			// Ready the controller will overwrite.
			setConditions(t, c, name, cond("Ready", "Unknown", "Meddled"), cond("Early", "True", "User"), cond("Foreign", "True", "OtherController"))

			// The controller's pass: Ready is True; it knows nothing of Foreign.
			if err := unstructured.SetNestedSlice(obj.Object, []any{cond("Ready", "True", "Succeeded"), cond("Early", "True", "User")}, "status", "conditions"); err != nil {
				t.Fatal(err)
			}
			if err := unstructured.SetNestedField(obj.Object, "v1", "status", "observed"); err != nil {
				t.Fatal(err)
			}
			if tc.metadata {
				obj.SetLabels(map[string]string{"seen": "yes"})
			}
			if err := h.Patch(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
			got := conditionsOn(t, c, name)
			want := map[string]string{"Ready": "True/Succeeded", "Early": "True/User", "Foreign": "True/OtherController"}
			for typ, v := range want {
				if got[typ] != v {
					t.Errorf("condition %s is %q, want %q (all: %v)", typ, got[typ], v, got)
				}
			}
			if len(got) != len(want) {
				t.Errorf("conditions %v, want %v", got, want)
			}

			// The next write of the same pass starts from what the server holds.
			if err := unstructured.SetNestedField(obj.Object, "v2", "status", "observed"); err != nil {
				t.Fatal(err)
			}
			if err := h.Patch(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
			if got := conditionsOn(t, c, name); got["Foreign"] != "True/OtherController" || got["Ready"] != "True/Succeeded" {
				t.Errorf("after a second patch: %v", got)
			}
		})
	}
}

// With the optimistic lock as well, a write since the read is a Conflict: the pass read a
// stale object and leaves the write to the next one.
func TestOwnedConditionsUnderTheLockConflict(t *testing.T) {
	c := kube(t)
	const name = "locked"
	if err := c.Create(t.Context(), widget(name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), widget(name)) })
	obj := widget(name)
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	h, err := patch.New(c, obj, patch.WithOwnedConditions("Ready"), patch.WithOptimisticLock())
	if err != nil {
		t.Fatal(err)
	}
	setConditions(t, c, name, cond("Foreign", "True", "OtherController"))
	if err := unstructured.SetNestedSlice(obj.Object, []any{cond("Ready", "True", "Succeeded")}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if err := h.Patch(t.Context(), obj); !apierrors.IsConflict(err) {
		t.Fatalf("patch after another write: %v, want a Conflict", err)
	}
	if got := conditionsOn(t, c, name); got["Foreign"] != "True/OtherController" || got["Ready"] != "" {
		t.Errorf("conditions after the refused patch: %v", got)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
