// Package exports writes a resource's connection details where its application reads them: CEL
// expressions over the resource (ASO's configMapExpressions / secretExpressions), Kubernetes
// ConfigMaps and Secrets owned by the resource, and one Key Vault secret per resource holding a
// JSON map.
package exports

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// The kinds of Kubernetes destination.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

// Destination is one key of a ConfigMap or Secret in the resource's namespace.
type Destination struct {
	Kind string // KindConfigMap or KindSecret
	Name string
	Key  string
}

// Value is a value to write at a destination.
type Value struct {
	Destination
	Value string
}

// Expression is a CEL expression whose result goes to a destination. `self` is the resource as
// a map (apiVersion, kind, metadata, spec, status); Secret expressions also see `secret`, the
// secret values the resource's adapter offers (a map, possibly empty: of strings for the typed
// kinds, a POST action's JSON answer for the generic kind). A string
// result needs Key; a map of strings needs no Key and writes one key per entry, as in ASO.
type Expression struct {
	Destination
	Expr string
}

// Limits on what a user's expression may cost.
const (
	MaxExpressionLength = 4096
	costLimit           = 1_000_000
)

// ErrExpression marks an expression that does not compile, fails, or returns a value of the
// wrong type: a user's error, not retried until the spec changes.
var ErrExpression = errors.New("invalid export expression")

var (
	envOnce   sync.Once
	cmEnv     *cel.Env
	secretEnv *cel.Env
	envErr    error

	progMu    sync.Mutex
	programs  = map[progKey]cel.Program{}
	maxCached = 1024
)

var mapStringString = reflect.TypeFor[map[string]string]()

type progKey struct {
	secret bool
	expr   string
}

func envs() (*cel.Env, *cel.Env, error) {
	envOnce.Do(func() {
		common := []cel.EnvOption{
			cel.Variable("self", cel.DynType),
			ext.Strings(), ext.Encoders(), ext.Lists(), ext.Sets(), ext.Math(),
			cel.OptionalTypes(),
		}
		cmEnv, envErr = cel.NewEnv(common...)
		if envErr != nil {
			return
		}
		// Values are dyn: the generic kind's secret is an action's JSON answer (nested objects,
		// lists); a typed kind's map of strings is one too.
		secretEnv, envErr = cmEnv.Extend(cel.Variable("secret", cel.MapType(cel.StringType, cel.DynType)))
	})
	return cmEnv, secretEnv, envErr
}

func program(secret bool, expr string) (cel.Program, error) {
	key := progKey{secret, expr}
	progMu.Lock()
	p, ok := programs[key]
	progMu.Unlock()
	if ok {
		return p, nil
	}
	cm, sec, err := envs()
	if err != nil {
		return nil, fmt.Errorf("build CEL environment: %w", err)
	}
	env := cm
	if secret {
		env = sec
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%w: compile: %w", ErrExpression, iss.Err())
	}
	p, err = env.Program(ast, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrExpression, err)
	}
	progMu.Lock()
	if len(programs) >= maxCached {
		programs = map[progKey]cel.Program{}
	}
	programs[key] = p
	progMu.Unlock()
	return p, nil
}

// Evaluate runs exprs over obj (the resource as JSON-shaped map, e.g. from
// runtime.DefaultUnstructuredConverter) with no secret values.
func Evaluate(obj map[string]any, exprs []Expression) ([]Value, error) {
	return EvaluateWith(obj, nil, exprs)
}

// EvaluateWith runs exprs over obj; Secret expressions also see secret. It returns the values in
// the order of exprs (a map result's keys sorted), or an error naming the first expression that
// failed, wrapping ErrExpression. A ConfigMap expression cannot reference `secret` (it does not
// compile), so secret values never reach a ConfigMap.
func EvaluateWith(obj map[string]any, secret map[string]string, exprs []Expression) ([]Value, error) {
	js := make(map[string]any, len(secret))
	for k, v := range secret {
		js[k] = v
	}
	return EvaluateJSON(obj, js, exprs)
}

// EvaluateJSON is EvaluateWith with secret as JSON (a POST action's answer: nested objects and
// lists).
func EvaluateJSON(obj map[string]any, secret map[string]any, exprs []Expression) ([]Value, error) {
	if secret == nil {
		secret = map[string]any{}
	}
	var out []Value
	for i, e := range exprs {
		vals, err := evaluate(obj, secret, e)
		if err != nil {
			return nil, fmt.Errorf("%s expression %d (%s %q): %w", kindWord(e.Kind), i, e.Name, e.Key, err)
		}
		out = append(out, vals...)
	}
	return out, nil
}

// Compile checks exprs without evaluating them: each has a kind and a destination and
// compiles. Callers run it before any side effect, so a bad expression changes nothing.
func Compile(exprs []Expression) error {
	for i, e := range exprs {
		if err := check(e); err != nil {
			return fmt.Errorf("%s expression %d (%s %q): %w", kindWord(e.Kind), i, e.Name, e.Key, err)
		}
		if _, err := program(e.Kind == KindSecret, e.Expr); err != nil {
			return fmt.Errorf("%s expression %d (%s %q): %w", kindWord(e.Kind), i, e.Name, e.Key, err)
		}
	}
	return nil
}

func kindWord(k string) string {
	if k == KindSecret {
		return "secret"
	}
	return "configMap"
}

// check is what an expression needs besides compiling.
func check(e Expression) error {
	if e.Kind != KindConfigMap && e.Kind != KindSecret {
		return fmt.Errorf("%w: kind %q is neither %s nor %s", ErrExpression, e.Kind, KindConfigMap, KindSecret)
	}
	if e.Name == "" {
		return fmt.Errorf("%w: no destination name", ErrExpression)
	}
	if len(e.Expr) > MaxExpressionLength {
		return fmt.Errorf("%w: longer than %d characters", ErrExpression, MaxExpressionLength)
	}
	return nil
}

func evaluate(obj map[string]any, secret map[string]any, e Expression) ([]Value, error) {
	if err := check(e); err != nil {
		return nil, err
	}
	isSecret := e.Kind == KindSecret
	p, err := program(isSecret, e.Expr)
	if err != nil {
		return nil, err
	}
	vars := map[string]any{"self": obj}
	if isSecret {
		vars["secret"] = secret
	}
	res, _, err := p.Eval(vars)
	if err != nil {
		return nil, fmt.Errorf("%w: evaluate: %w", ErrExpression, err)
	}
	return results(e, res, isSecret)
}

// results turns a CEL value into destinations: a string at e.Key, or a map of strings, one key
// per entry. A failure never shows a Secret expression's result.
func results(e Expression, res ref.Val, isSecret bool) ([]Value, error) {
	show := func(v ref.Val) string {
		if isSecret {
			return "a " + v.Type().TypeName()
		}
		return fmt.Sprintf("%v (%s)", v.Value(), v.Type().TypeName())
	}
	if v, ok := res.(types.String); ok {
		if e.Key == "" {
			return nil, fmt.Errorf("%w: a string result needs a key", ErrExpression)
		}
		return []Value{{Destination: e.Destination, Value: string(v)}}, nil
	}
	if res.Type() != types.MapType {
		return nil, fmt.Errorf("%w: result is %s, want a string or a map of strings", ErrExpression, show(res))
	}
	if e.Key != "" {
		return nil, fmt.Errorf("%w: a map result takes no key (each entry is a key)", ErrExpression)
	}
	native, err := res.ConvertToNative(mapStringString)
	if err != nil {
		return nil, fmt.Errorf("%w: result is a map, but not of strings to strings", ErrExpression)
	}
	m := native.(map[string]string)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Value, 0, len(keys))
	for _, k := range keys {
		d := e.Destination
		d.Key = k
		out = append(out, Value{Destination: d, Value: m[k]})
	}
	return out, nil
}
