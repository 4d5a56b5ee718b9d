package armresource

import "context"

// BodyHash is the applied-hash (AnnotationAppliedHash) of the request body the reconciler
// builds from spec, when that body depends on nothing outside the spec: no `xFromConfig`, no
// secret input, no role name to look up. ok is false otherwise. `cerulean import` stamps it on
// the manifests it writes, so that the manager adopts a resource that matches its spec with a
// read and a drift check, not a PUT.
func (k Kind) BodyHash(spec map[string]any) (hash string, ok bool) {
	if len(configMapRefs(spec)) > 0 || len(secretInputRefs(spec, k.SecretInputs)) > 0 {
		return "", false
	}
	body, err := armBody(spec, k.Flatten, nil)
	if err != nil {
		return "", false
	}
	moveToProperties(body, k.PropertyKeys)
	if k.Prepare != nil {
		// Only references by ARM id resolve without the API server or ARM (a nil env).
		props, _ := body["properties"].(map[string]any)
		ref, _ := props["roleDefinitionReference"].(map[string]any)
		if _, byID := ref["armId"].(string); !byID || len(ref) != 1 {
			return "", false
		}
		if err := k.Prepare(context.Background(), nil, body); err != nil {
			return "", false
		}
	}
	return bodyHash(body), true
}
