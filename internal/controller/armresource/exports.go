package armresource

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/exports"
)

// CompileExpressions checks operatorSpec's expressions before anything is written to ARM (and
// at admission): a bad one is a spec error and creates nothing.
func CompileExpressions(obj *unstructured.Unstructured) error {
	if err := exports.Compile(expressions(obj)); err != nil {
		return fmt.Errorf("%w: %w", errInvalidSpec, err)
	}
	return nil
}

// export writes operatorSpec's configMaps, secrets and expressions.
func (r *Reconciler) export(ctx context.Context, obj *unstructured.Unstructured, status map[string]any, env *exportEnv) error {
	var vals []exports.Value
	if r.opts.Kind.Exports != nil {
		v, err := r.opts.Kind.Exports(ctx, env, withoutUnexported(obj, unexported(obj, r.opts.Kind.Exported)), status)
		if err != nil {
			return fmt.Errorf("%w: %w", errExport, err)
		}
		vals = append(vals, v...)
	}
	exprs := expressions(obj)
	if len(exprs) > 0 {
		self := obj.DeepCopy().Object
		st := deepCopy(status).(map[string]any)
		self["status"] = st
		secret, err := r.secretValues(ctx, env, exprs)
		if err != nil {
			return fmt.Errorf("%w: %w", errExport, err)
		}
		v, err := exports.EvaluateJSON(self, secret, exprs)
		if errors.Is(err, exports.ErrExpression) {
			return fmt.Errorf("%w: %w", errInvalidSpec, err) // fixed only by a spec change
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errExport, err)
		}
		vals = append(vals, v...)
	}
	if vault := r.exportVault(obj); vault != "" && len(vals) > 0 {
		var kube []exports.Value
		secret := map[string]string{}
		for _, v := range vals {
			if v.Kind == "Secret" {
				secret[v.Key] = v.Value
			} else {
				kube = append(kube, v)
			}
		}
		if len(secret) > 0 {
			name := exports.KeyVaultSecretName(obj.GetKind(), obj.GetNamespace(), obj.GetName())
			if err := r.vault.Write(ctx, env.cred.Cached(), vault, name, secret); err != nil {
				return fmt.Errorf("%w: %w", errExport, err)
			}
		}
		vals = kube
	}
	if len(vals) == 0 {
		return nil
	}
	if err := r.kube.Write(ctx, obj, vals); err != nil {
		return fmt.Errorf("%w: %w", errExport, err)
	}
	return nil
}

// secretValues are the kind's secret values when a Secret expression may read them, else nil.
func (r *Reconciler) secretValues(ctx context.Context, env *exportEnv, exprs []exports.Expression) (map[string]any, error) {
	k := r.opts.Kind
	if k.SecretValues == nil && k.SecretAnswer == nil {
		return nil, nil
	}
	for _, e := range exprs {
		if e.Kind != exports.KindSecret {
			continue
		}
		if k.SecretAnswer != nil {
			return k.SecretAnswer(ctx, env)
		}
		vals, err := k.SecretValues(ctx, env)
		if err != nil {
			return nil, err
		}
		out := make(map[string]any, len(vals))
		for name, v := range vals {
			out[name] = v
		}
		return out, nil
	}
	return nil, nil
}

// exportVault is the Key Vault URL secret exports go to, "" for Kubernetes Secrets.
func (r *Reconciler) exportVault(obj *unstructured.Unstructured) string {
	v, ok := obj.GetAnnotations()[AnnotationExportKeyVault]
	if !ok {
		v = r.opts.ExportKeyVault
	}
	if strings.EqualFold(v, "kubernetes") || r.vault == nil {
		return ""
	}
	return v
}

func expressions(obj *unstructured.Unstructured) []exports.Expression {
	var out []exports.Expression
	for _, f := range []struct{ field, kind string }{{"configMapExpressions", "ConfigMap"}, {"secretExpressions", "Secret"}} {
		list, _, _ := unstructured.NestedSlice(obj.Object, "spec", "operatorSpec", f.field)
		for _, e := range list {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			key, _ := m["key"].(string)
			val, _ := m["value"].(string)
			out = append(out, exports.Expression{Destination: exports.Destination{Kind: f.kind, Name: name, Key: key}, Expr: val})
		}
	}
	return out
}

// exportEnv is what Exports may use.
type exportEnv struct {
	obj        *unstructured.Unstructured
	cred       *credentials.Credential
	reader     armAPI
	id         string
	apiVersion string
	keys       map[string]string // listKeys' answer, asked once per pass
}

// listKeys returns a storage account's keys as key1, key2.
func (e *exportEnv) listKeys(ctx context.Context) (map[string]string, error) {
	if e.keys != nil {
		return e.keys, nil
	}
	res, err := e.reader.post(ctx, e.id+"/listKeys", e.apiVersion)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out := map[string]string{}
	keys, _ := res["keys"].([]any)
	for _, k := range keys {
		m, _ := k.(map[string]any)
		name, _ := m["keyName"].(string)
		val, _ := m["value"].(string)
		out[name] = val
	}
	e.keys = out
	return out, nil
}
