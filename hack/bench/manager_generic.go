package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func init() {
	register(section{title: "Manager: the generic kind against a typed kind", run: benchGenericKind})
}

var mgrGeneric = flag.Int("manager-generic", 100, "generic kind section: managed identities, created once as UserAssignedIdentity and once as AzureResource")

// genericBenchType is the type both workloads create: the typed kind's, so that the only
// difference is the adapter.
const genericBenchType = "Microsoft.ManagedIdentity/userAssignedIdentities"

var gvrGeneric = schema.GroupVersionResource{Group: "cerulean.dev", Version: "v1alpha1", Resource: "azureresources"}

// benchGenericKind creates the same managed identities under one ResourceGroup twice, with
// Cerulean's manager: as the typed UserAssignedIdentity and as the generic AzureResource, each
// run in a namespace and manager process of its own, and reports time to Ready, the manager's
// CPU per object until Ready, and steady-state ARM traffic, generic over typed.
func benchGenericKind(ctx context.Context, env benchEnv) ([]row, error) {
	me, err := startManagerEnv(ctx, env, "generic")
	if err != nil {
		return nil, err
	}
	defer me.stop()
	var res [2]peerResult
	for i, generic := range []bool{false, true} {
		p := ceruleanManager(me)
		if generic {
			p.name = "cerulean-generic"
		}
		fmt.Fprintf(os.Stderr, "  %s: %d identities…\n", p.name, *mgrGeneric)
		r, err := runPeer(ctx, me, p, func(_ *managerEnv, ns, group string) benchWorkload { return genericWorkload(ns, group, generic) })
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", p.name, err)
		}
		fmt.Fprintf(os.Stderr, "  %s: %+v\n", p.name, r)
		res[i] = r
	}
	typed, gen := res[0], res[1]
	ratio := func(g, t float64) string {
		if t == 0 {
			return ""
		}
		return fmt.Sprintf("generic/typed %.2f", g/t)
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	cpu := func(r peerResult) float64 { return float64(r.cpuToReady.Microseconds()) / 1000 / float64(r.objects) }
	window := fmt.Sprintf("sync period %s, %d periods of steady state, scaled to an hour", *mgrSync, *mgrPeriods)
	return []row{
		{benchmark: fmt.Sprintf("time to Ready, %d managed identities and their ResourceGroup (cap %s)", *mgrGeneric, *mgrCap),
			result:     fmt.Sprintf("typed %s, generic %s", typed.readyIn.Round(100*time.Millisecond), gen.readyIn.Round(100*time.Millisecond)),
			vsBaseline: ratio(gen.readyIn.Seconds(), typed.readyIn.Seconds())},
		{benchmark: "manager CPU (user + system) per object, from start until every object is Ready",
			result: fmt.Sprintf("typed %.1f ms, generic %.1f ms", cpu(typed), cpu(gen)), vsBaseline: ratio(cpu(gen), cpu(typed))},
		{benchmark: "ARM writes per resource per hour, " + window,
			result: fmt.Sprintf("typed %s, generic %s", num(typed.perResourceHour(typed.writes)), num(gen.perResourceHour(gen.writes)))},
		{benchmark: "ARM reads per resource per hour, " + window,
			result:     fmt.Sprintf("typed %s, generic %s", num(typed.perResourceHour(typed.reads)), num(gen.perResourceHour(gen.reads))),
			vsBaseline: ratio(gen.perResourceHour(gen.reads), typed.perResourceHour(typed.reads))},
	}, nil
}

// genericWorkload is one ResourceGroup and -manager-generic identities in it, typed or generic.
func genericWorkload(ns, group string, generic bool) benchWorkload {
	obj := func(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
	}
	wl := benchWorkload{sets: *mgrGeneric, gvrs: []schema.GroupVersionResource{gvrResourceGroup},
		objs: []*unstructured.Unstructured{obj("resources.azure.com/v1api20200601", "ResourceGroup", group, map[string]any{"location": "eastus"})}}
	for i := range *mgrGeneric {
		name := fmt.Sprintf("id-%05d", i)
		if generic {
			wl.objs = append(wl.objs, obj("cerulean.dev/v1alpha1", "AzureResource", name, map[string]any{
				"owner": map[string]any{"group": "resources.azure.com", "kind": "ResourceGroup", "name": group},
				"type":  genericBenchType, "apiVersion": "2023-01-31", "location": "eastus"}))
		} else {
			wl.objs = append(wl.objs, obj("managedidentity.azure.com/v1api20230131", "UserAssignedIdentity", name, map[string]any{
				"owner": map[string]any{"name": group}, "location": "eastus"}))
		}
	}
	if generic {
		wl.gvrs = append(wl.gvrs, gvrGeneric)
	} else {
		wl.gvrs = append(wl.gvrs, gvrIdentity)
	}
	return wl
}
