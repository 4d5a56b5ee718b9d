package exports_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/cerulean/cerulean/internal/controller/exports"
)

// identity is a UserAssignedIdentity as the manager holds it, decoded from YAML the way the API
// server returns it (numbers become int64 or float64 through JSON).
const identity = `
apiVersion: managedidentity.azure.com/v1api20230131
kind: UserAssignedIdentity
metadata:
  name: app-identity
  namespace: team-a
  labels: {app: web}
  generation: 3
spec:
  location: eastus
  owner: {name: rg-app}
  tags: {env: prod, team: a}
status:
  id: /subscriptions/0000/resourceGroups/rg-app/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app-identity
  clientId: 6f1c0a42-3b1e-4b5f-9f5c-7d8b2a1e0c33
  principalId: 2b7e151c-2f5e-4a8f-8c3e-0b8b7c6d5e4f
  tenantId: 72f988bf-86f1-41af-91ab-2d7cd011db47
  conditions:
  - {type: Ready, status: "True", severity: ""}
`

func object(t testing.TB) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(identity))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil { // as unstructured objects are decoded
		t.Fatal(err)
	}
	return m
}

func TestEvaluate(t *testing.T) {
	obj := object(t)
	cm := func(name, key, expr string) exports.Expression {
		return exports.Expression{Destination: exports.Destination{Kind: exports.KindConfigMap, Name: name, Key: key}, Expr: expr}
	}
	got, err := exports.Evaluate(obj, []exports.Expression{
		cm("ids", "clientId", "self.status.clientId"),
		cm("ids", "where", `self.spec.location + "/" + self.metadata.namespace`),
		cm("ids", "generation", "string(self.metadata.generation)"),
		cm("ids", "", `{"tenant": self.status.tenantId, "team": self.spec.tags.team}`),
		cm("ids", "tagCount", "string(size(self.spec.tags))"),
		cm("ids", "upper", "self.metadata.name.upperAscii()"),
		cm("ids", "optional", `self.?spec.nope.orValue("none")`),
	})
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	d := func(key, v string) exports.Value {
		return exports.Value{Destination: exports.Destination{Kind: exports.KindConfigMap, Name: "ids", Key: key}, Value: v}
	}
	want := []exports.Value{
		d("clientId", "6f1c0a42-3b1e-4b5f-9f5c-7d8b2a1e0c33"),
		d("where", "eastus/team-a"),
		d("generation", "3"),
		d("team", "a"), d("tenant", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
		d("tagCount", "2"),
		d("upper", "APP-IDENTITY"),
		d("optional", "none"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Evaluate =\n%v\nwant\n%v", got, want)
	}
}

func TestEvaluateSecretVariable(t *testing.T) {
	obj := object(t)
	sec := exports.Expression{Destination: exports.Destination{Kind: exports.KindSecret, Name: "s", Key: "conn"},
		Expr: `"AccountKey=" + secret.key1 + ";Id=" + self.status.clientId`}
	got, err := exports.EvaluateWith(obj, map[string]string{"key1": "c2VjcmV0"}, []exports.Expression{sec})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Value != "AccountKey=c2VjcmV0;Id=6f1c0a42-3b1e-4b5f-9f5c-7d8b2a1e0c33" {
		t.Errorf("got %v", got)
	}
	// The same expression into a ConfigMap does not compile: secret values never reach one.
	cm := sec
	cm.Kind = exports.KindConfigMap
	_, err = exports.EvaluateWith(obj, map[string]string{"key1": "c2VjcmV0"}, []exports.Expression{cm})
	if !errors.Is(err, exports.ErrExpression) || !strings.Contains(err.Error(), "undeclared reference to 'secret'") {
		t.Errorf("configMap expression using secret: %v", err)
	}
}

func TestEvaluateErrors(t *testing.T) {
	obj := object(t)
	for _, tc := range []struct {
		name string
		e    exports.Expression
		want []string // in the message
		hide string   // never in the message
	}{
		{name: "syntax", e: expr(exports.KindConfigMap, "k", "self.status.clientId +"), want: []string{"configMap expression 0", `"k"`, "compile", "Syntax error"}},
		{name: "unknown field", e: expr(exports.KindConfigMap, "k", "self.status.nope"), want: []string{"evaluate", "no such key: nope"}},
		{name: "non-string result", e: expr(exports.KindConfigMap, "k", "self.metadata.generation"), want: []string{"result is 3 (int)", "want a string or a map of strings"}},
		{name: "list result", e: expr(exports.KindConfigMap, "k", "self.status.conditions"), want: []string{"want a string or a map of strings"}},
		{name: "map of non-strings", e: expr(exports.KindConfigMap, "", "self.status"), want: []string{"not of strings to strings"}},
		{name: "map with a key", e: expr(exports.KindConfigMap, "k", "self.spec.tags"), want: []string{"a map result takes no key"}},
		{name: "string without a key", e: expr(exports.KindConfigMap, "", "self.status.clientId"), want: []string{"a string result needs a key"}},
		{name: "secret result hidden", e: expr(exports.KindSecret, "k", "size(secret.key1)"), want: []string{"secret expression 0", "result is a int"}},
		{name: "secret map hidden", e: expr(exports.KindSecret, "", `{"a": secret.key1, "b": 1}`), want: []string{"not of strings"}, hide: "hunter2"},
		{name: "unknown kind", e: expr("Pod", "k", `"x"`), want: []string{`kind "Pod"`}},
		{name: "too long", e: expr(exports.KindConfigMap, "k", `"`+strings.Repeat("a", exports.MaxExpressionLength)+`"`), want: []string{"longer than"}},
		{name: "too costly", e: expr(exports.KindConfigMap, "k",
			`string([1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, [1,2,3,4,5,6,7,8,9,10].map(f, a+b+c+d+e+f)))))).size())`),
			want: []string{"cost limit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := exports.EvaluateWith(obj, map[string]string{"key1": "hunter2"}, []exports.Expression{tc.e})
			if !errors.Is(err, exports.ErrExpression) {
				t.Fatalf("err = %v, want ErrExpression", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows a secret value", err)
			}
		})
	}
}

func expr(kind, key, e string) exports.Expression {
	return exports.Expression{Destination: exports.Destination{Kind: kind, Name: "dest", Key: key}, Expr: e}
}

// BenchmarkEvaluate is the cost of a resource's exports on each reconcile: compiled programs are
// cached, so "cached" is the steady state and "compile" the first reconcile after a change.
func BenchmarkEvaluate(b *testing.B) {
	obj := object(b)
	exprs := []exports.Expression{
		expr(exports.KindConfigMap, "clientId", "self.status.clientId"),
		expr(exports.KindConfigMap, "", `{"tenant": self.status.tenantId, "where": self.spec.location + "/" + self.metadata.namespace}`),
	}
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := exports.Evaluate(obj, exprs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			unique := []exports.Expression{expr(exports.KindConfigMap, "k", fmt.Sprintf(`self.status.clientId + "%d"`, i))}
			if _, err := exports.Evaluate(obj, unique); err != nil {
				b.Fatal(err)
			}
		}
	})
}
