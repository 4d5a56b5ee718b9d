package armresource

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Spec keys that are Kubernetes-side only: never sent to ARM.
var operatorKeys = map[string]bool{"owner": true, "azureName": true, "operatorSpec": true}

// ARM's top-level resource keys; under a flattened schema everything else is a property.
var topLevelKeys = map[string]bool{
	"location": true, "tags": true, "kind": true, "sku": true, "identity": true,
	"extendedLocation": true, "zones": true, "plan": true, "managedBy": true, "properties": true,
}

// ConfigMapLookup reads key of ConfigMap name in the resource's namespace.
type ConfigMapLookup func(name, key string) (string, error)

// armBody turns a spec into the ARM request body: operator keys dropped, `xFromConfig`
// references replaced by `x` read from their ConfigMaps, and for a flattened kind the
// properties gathered under "properties". spec is not modified.
func armBody(spec map[string]any, flatten bool, lookup ConfigMapLookup) (map[string]any, error) {
	body := map[string]any{}
	for k, v := range spec {
		if !operatorKeys[k] {
			body[k] = deepCopy(v)
		}
	}
	if err := resolveFromConfig(body, lookup); err != nil {
		return nil, err
	}
	if !flatten {
		return body, nil
	}
	out := map[string]any{}
	props := map[string]any{}
	for k, v := range body {
		if topLevelKeys[k] && k != "properties" {
			out[k] = v
		} else if k == "properties" {
			if m, ok := v.(map[string]any); ok {
				for pk, pv := range m {
					props[pk] = pv
				}
			}
		} else {
			props[k] = v
		}
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	return out, nil
}

// moveToProperties moves keys ARM usually has at the top level (a Redis's sku) under
// "properties", where the kind's ARM schema has them.
func moveToProperties(body map[string]any, keys []string) {
	for _, k := range keys {
		v, ok := body[k]
		if !ok {
			continue
		}
		props, _ := body["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
			body["properties"] = props
		}
		props[k] = v
		delete(body, k)
	}
}

// resolveFromConfig replaces every `xFromConfig: {name, key}` in v, at any depth, by `x`.
func resolveFromConfig(v any, lookup ConfigMapLookup) error {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if field, ok := strings.CutSuffix(k, "FromConfig"); ok && field != "" {
				ref, _ := t[k].(map[string]any)
				name, _ := ref["name"].(string)
				key, _ := ref["key"].(string)
				val, err := lookup(name, key)
				if err != nil {
					return fmt.Errorf("resolve %s: %w", k, err)
				}
				delete(t, k)
				t[field] = val
				continue
			}
			if err := resolveFromConfig(t[k], lookup); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range t {
			if err := resolveFromConfig(e, lookup); err != nil {
				return err
			}
		}
	}
	return nil
}

// configMapRefs lists the ConfigMaps a spec's `xFromConfig` references name.
func configMapRefs(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				if strings.HasSuffix(k, "FromConfig") {
					if ref, ok := e.(map[string]any); ok {
						if n, ok := ref["name"].(string); ok {
							out = append(out, n)
						}
					}
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	sort.Strings(out)
	return out
}

// statusFromARM is the resource as ARM returned it, in the kind's status shape: a flattened
// kind's properties are lifted to the top.
func statusFromARM(res map[string]any, flatten bool) map[string]any {
	out := map[string]any{}
	for k, v := range res {
		if v != nil {
			out[k] = dropNulls(deepCopy(v))
		}
	}
	if !flatten {
		return out
	}
	if props, ok := out["properties"].(map[string]any); ok {
		delete(out, "properties")
		for k, v := range props {
			if _, clash := out[k]; !clash {
				out[k] = v
			}
		}
	}
	return out
}

// bodyHash identifies a request body, to know whether it was applied already.
func bodyHash(body map[string]any) string {
	b, _ := json.Marshal(body) // map keys are sorted: stable
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// drifted reports where ARM's resource differs from the desired body, or "" when it does not.
// Only values present on both sides are compared (ARM omits write-only and defaulted fields);
// tags are compared whole, since a removed tag is drift; strings compare case-insensitively,
// as ARM treats locations and ids.
func drifted(desired, actual map[string]any) string {
	return diff("", desired, actual)
}

func diff(path string, desired, actual any) string {
	switch d := desired.(type) {
	case map[string]any:
		a, ok := actual.(map[string]any)
		if !ok {
			return path
		}
		for _, k := range sortedKeys(d) {
			p := strings.TrimPrefix(path+"."+k, ".")
			av, present := a[k]
			if k == "tags" && path == "" {
				if !tagsEqual(d[k], av) {
					return p
				}
				continue
			}
			if !present {
				continue
			}
			if where := diff(p, d[k], av); where != "" {
				return where
			}
		}
		return ""
	case []any:
		a, ok := actual.([]any)
		if !ok || len(a) != len(d) {
			return path
		}
		for i := range d {
			if where := diff(fmt.Sprintf("%s[%d]", path, i), d[i], a[i]); where != "" {
				return where
			}
		}
		return ""
	case string:
		a, ok := actual.(string)
		if !ok || !strings.EqualFold(strings.ReplaceAll(d, " ", ""), strings.ReplaceAll(a, " ", "")) {
			return path
		}
		return ""
	case nil:
		return ""
	default:
		if !reflect.DeepEqual(normNumber(d), normNumber(actual)) {
			return path
		}
		return ""
	}
}

func tagsEqual(d, a any) bool {
	dm, _ := d.(map[string]any)
	am, _ := a.(map[string]any)
	if len(dm) != len(am) {
		return false
	}
	for k, v := range dm {
		if fmt.Sprint(v) != fmt.Sprint(am[k]) {
			return false
		}
	}
	return true
}

func normNumber(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	case int32:
		return float64(n)
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// dropNulls removes null map values at any depth: the API server prunes them from a status,
// and a status compared with its stored copy must match it.
func dropNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
			} else {
				t[k] = dropNulls(e)
			}
		}
	case []any:
		for i, e := range t {
			t[i] = dropNulls(e)
		}
	}
	return v
}
