package armresource

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Exported names the operatorSpec.configMaps and .secrets entries a kind produces.
type Exported struct {
	ConfigMaps []string
	Secrets    []string
}

// ReasonExportNotProduced is the Warning Event of an operatorSpec entry Cerulean keeps but
// does not export.
const ReasonExportNotProduced = "ExportNotProduced"

// unexported lists, as "configMaps.x" / "secrets.y", the operatorSpec entries of obj that the
// kind does not produce: entries of Azure Service Operator's schema Cerulean lacks. The schema
// keeps them (a manifest written for ASO applies unchanged); they are reported, not exported.
func unexported(obj *unstructured.Unstructured, k Exported) []string {
	var out []string
	for _, f := range []struct {
		field string
		known []string
	}{{"configMaps", k.ConfigMaps}, {"secrets", k.Secrets}} {
		m, _, _ := unstructured.NestedMap(obj.Object, "spec", "operatorSpec", f.field)
		for _, name := range sortedKeys(m) {
			if !slices.Contains(f.known, name) {
				out = append(out, f.field+"."+name)
			}
		}
	}
	return out
}

// withoutUnexported is obj without the entries the kind does not produce (a copy only when
// there are some), for Exports, which export every entry they are given.
func withoutUnexported(obj *unstructured.Unstructured, names []string) *unstructured.Unstructured {
	if len(names) == 0 {
		return obj
	}
	out := obj.DeepCopy()
	for _, n := range names {
		field, name, _ := strings.Cut(n, ".")
		unstructured.RemoveNestedField(out.Object, "spec", "operatorSpec", field, name)
	}
	return out
}

// unexportedNote is the sentence Ready's message carries for entries not exported.
func unexportedNote(names []string) string {
	return "Not exported (Cerulean does not produce these operatorSpec entries of Azure Service Operator's schema): " + strings.Join(names, ", ")
}

// noteUnexported puts the entries not exported into a Ready=True outcome's message, and records
// a Warning Event naming them when that message is new (not on every pass).
func (p *pass) noteUnexported(o *Outcome) {
	names := unexported(p.obj, p.r.opts.Kind.Exported)
	if len(names) == 0 || o.Status != metav1.ConditionTrue {
		return
	}
	o.Message = unexportedNote(names)
	if c := readyCondition(conditionsOf(p.orig)); c != nil && c.Status == metav1.ConditionTrue && c.Message == o.Message {
		return
	}
	p.r.recorder.Eventf(p.obj, nil, corev1.EventTypeWarning, ReasonExportNotProduced, "Reconcile", "%s", o.Message)
}
