// Package integration_test proves the exports package against a real kube-apiserver (ConfigMaps
// and Secrets) and the local cloud's Key Vault.
package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/controller/exports"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

// kube is a controller-runtime client of the shared control plane and a fresh namespace.
func kube(t *testing.T) (client.Client, string) {
	t.Helper()
	c, err := client.New(devenvtest.ControlPlane(t).RESTConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "exports-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return c, ns.Name
}

// owner creates a resource to own exports. A ServiceAccount stands in for an Azure resource:
// the writer only needs a namespaced object with a kind and a UID.
func owner(t *testing.T, c client.Client, ns, name string) *corev1.ServiceAccount {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
	return sa
}

func val(kind, name, key, v string) exports.Value {
	return exports.Value{Destination: exports.Destination{Kind: kind, Name: name, Key: key}, Value: v}
}

func getCM(t *testing.T, c client.Client, ns, name string) *corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &cm); err != nil {
		t.Fatal(err)
	}
	return &cm
}

func getSecret(t *testing.T, c client.Client, ns, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestKubeWriter(t *testing.T) {
	c, ns := kube(t)
	ctx := t.Context()
	w := exports.NewKubeWriter(c)
	app := owner(t, c, ns, "app-identity")

	vals := []exports.Value{
		val(exports.KindConfigMap, "identity", "clientId", "6f1c0a42-3b1e-4b5f-9f5c-7d8b2a1e0c33"),
		val(exports.KindConfigMap, "identity", "tenantId", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
		val(exports.KindSecret, "storage", "key1", "s3cr3t-account-key"),
	}
	if err := w.Write(ctx, app, vals); err != nil {
		t.Fatalf("Write: %v", err)
	}
	cm, sec := getCM(t, c, ns, "identity"), getSecret(t, c, ns, "storage")
	if cm.Data["clientId"] != "6f1c0a42-3b1e-4b5f-9f5c-7d8b2a1e0c33" || cm.Data["tenantId"] != "72f988bf-86f1-41af-91ab-2d7cd011db47" || len(cm.Data) != 2 {
		t.Errorf("ConfigMap data = %v", cm.Data)
	}
	if string(sec.Data["key1"]) != "s3cr3t-account-key" || sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret = %v %v", sec.Type, sec.Data)
	}
	for _, o := range []client.Object{cm, sec} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != app.UID || refs[0].Kind != "ServiceAccount" || refs[0].APIVersion != "v1" ||
			refs[0].Name != "app-identity" || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%s owner references = %+v", o.GetName(), refs)
		}
	}

	t.Run("unchanged values are not written", func(t *testing.T) {
		cmRV, secRV := getCM(t, c, ns, "identity").ResourceVersion, getSecret(t, c, ns, "storage").ResourceVersion
		for range 3 {
			if err := w.Write(ctx, app, vals); err != nil {
				t.Fatal(err)
			}
		}
		if got := getCM(t, c, ns, "identity").ResourceVersion; got != cmRV {
			t.Errorf("ConfigMap resourceVersion %s -> %s on an identical write", cmRV, got)
		}
		if got := getSecret(t, c, ns, "storage").ResourceVersion; got != secRV {
			t.Errorf("Secret resourceVersion %s -> %s on an identical write", secRV, got)
		}
	})

	t.Run("a changed value is written", func(t *testing.T) {
		rv := getSecret(t, c, ns, "storage").ResourceVersion
		changed := append([]exports.Value(nil), vals...)
		changed[2].Value = "rotated-key"
		if err := w.Write(ctx, app, changed); err != nil {
			t.Fatal(err)
		}
		s := getSecret(t, c, ns, "storage")
		if string(s.Data["key1"]) != "rotated-key" || s.ResourceVersion == rv {
			t.Errorf("after a change: %q (resourceVersion %s, was %s)", s.Data["key1"], s.ResourceVersion, rv)
		}
		vals = changed
	})

	t.Run("another resource merges its own keys", func(t *testing.T) {
		other := owner(t, c, ns, "other-identity")
		if err := w.Write(ctx, other, []exports.Value{val(exports.KindConfigMap, "identity", "otherClientId", "abc")}); err != nil {
			t.Fatal(err)
		}
		cm := getCM(t, c, ns, "identity")
		if cm.Data["otherClientId"] != "abc" || cm.Data["clientId"] != vals[0].Value {
			t.Errorf("merged data = %v", cm.Data)
		}
		refs := cm.GetOwnerReferences()
		if len(refs) != 2 || refs[1].UID != other.UID || refs[1].Controller != nil {
			t.Errorf("owner references after a merge = %+v", refs)
		}

		// Its keys are its own: the first resource cannot take them, nor the other way round.
		rv := cm.ResourceVersion
		err := w.Write(ctx, app, append(vals, val(exports.KindConfigMap, "identity", "otherClientId", "stolen")))
		if !errors.Is(err, exports.ErrKeyConflict) || !strings.Contains(err.Error(), "ServiceAccount other-identity") || !strings.Contains(err.Error(), `"otherClientId"`) {
			t.Errorf("writing another resource's key: %v", err)
		}
		err = w.Write(ctx, other, []exports.Value{val(exports.KindSecret, "storage", "key1", "mine")})
		if !errors.Is(err, exports.ErrKeyConflict) || strings.Contains(err.Error(), "rotated-key") || strings.Contains(err.Error(), "mine") {
			t.Errorf("writing another resource's secret key: %v", err)
		}
		if got := getCM(t, c, ns, "identity"); got.ResourceVersion != rv || got.Data["otherClientId"] != "abc" {
			t.Errorf("a refused write changed the ConfigMap: %v", got.Data)
		}
		if got := getSecret(t, c, ns, "storage"); string(got.Data["key1"]) != "rotated-key" {
			t.Errorf("a refused write changed the Secret")
		}
	})

	t.Run("a key no longer exported is removed", func(t *testing.T) {
		if err := w.Write(ctx, app, vals[1:]); err != nil { // clientId dropped
			t.Fatal(err)
		}
		cm := getCM(t, c, ns, "identity")
		if _, ok := cm.Data["clientId"]; ok || cm.Data["otherClientId"] != "abc" || cm.Data["tenantId"] == "" {
			t.Errorf("data = %v", cm.Data)
		}
	})

	t.Run("an object made by someone else keeps its keys", func(t *testing.T) {
		user := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"region": "west"}}
		if err := c.Create(ctx, user); err != nil {
			t.Fatal(err)
		}
		err := w.Write(ctx, app, []exports.Value{val(exports.KindConfigMap, "settings", "region", "east")})
		if !errors.Is(err, exports.ErrKeyConflict) || !strings.Contains(err.Error(), "not written by an export") {
			t.Errorf("overwriting a user's key: %v", err)
		}
		if err := w.Write(ctx, app, []exports.Value{val(exports.KindConfigMap, "settings", "clientId", "x")}); err != nil {
			t.Fatalf("adding a key to a user's ConfigMap: %v", err)
		}
		got := getCM(t, c, ns, "settings")
		if got.Data["region"] != "west" || got.Data["clientId"] != "x" {
			t.Errorf("data = %v", got.Data)
		}
	})

	t.Run("exports are collected with their owner", func(t *testing.T) {
		solo := owner(t, c, ns, "solo")
		if err := w.Write(ctx, solo, []exports.Value{val(exports.KindSecret, "solo-conn", "k", "v")}); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, solo); err != nil {
			t.Fatal(err)
		}
		// The kube-controller-manager's garbage collector deletes what only solo owned.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var s corev1.Secret
			err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "solo-conn"}, &s)
			return client.IgnoreNotFound(err) == nil && err != nil, client.IgnoreNotFound(err)
		})
		if err != nil {
			t.Fatalf("Secret owned by a deleted resource not collected: %v", err)
		}
	})
}
