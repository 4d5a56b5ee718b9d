package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func init() {
	register(section{title: "Manager: the service kinds (PostgreSQL, Redis, storage)", run: benchServiceKinds})
}

// Each set starts a real PostgreSQL and a real Redis in the cloud: a few sets are the load a
// 2-core machine carries.
var mgrServiceSets = flag.Int("manager-service-sets", 3, "service kinds section: sets of FlexibleServer + database + firewall rule, Redis, StorageAccount + blob service + container")

// benchServiceKinds runs the service kinds' workload under Cerulean's manager, then under ASO
// (unless -manager-only), and reports time to Ready, steady-state ARM traffic per resource and
// hour, and peak RSS.
func benchServiceKinds(ctx context.Context, env benchEnv) ([]row, error) {
	me, err := startManagerEnv(ctx, env, "services")
	if err != nil {
		return nil, err
	}
	defer me.stop()
	results, err := runPeers(ctx, me, fmt.Sprintf("%d service sets", *mgrServiceSets), serviceWorkload)
	if err != nil {
		return nil, err
	}
	return serviceRows(results), nil
}

func serviceRows(res map[string]peerResult) []row {
	var ref peerResult
	for _, r := range res {
		ref = r
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	secs := func(v float64) string {
		return time.Duration(v * float64(time.Second)).Round(100 * time.Millisecond).String()
	}
	mib := func(v float64) string { return fmt.Sprintf("%.0f MiB", v/(1<<20)) }
	window := fmt.Sprintf("sync period %s, %d periods of steady state, scaled to an hour", *mgrSync, *mgrPeriods)
	rows := []row{sideBySideAllReady(res, fmt.Sprintf("time to Ready, %d sets of FlexibleServer + database + firewall rule, Redis, StorageAccount + blob service + container, and their ResourceGroup (%d objects; cap %s; goal: Cerulean ≤ 0.5× ASO)",
		ref.pairs, ref.objects, *mgrCap), func(r peerResult) float64 { return r.readyIn.Seconds() }, secs)}
	rows = append(rows, readyRows(res)...)
	rows = append(rows, timelineRows(res)...)
	return append(rows,
		sideBySideAllReady(res, "ARM writes (PUT, PATCH, POST, DELETE) per resource per hour, "+window, func(r peerResult) float64 { return r.perResourceHour(r.writes) }, num),
		sideBySideAllReady(res, "ARM reads (GET) per resource per hour, "+window, func(r peerResult) float64 { return r.perResourceHour(r.reads) }, num),
		sideBySideAllReady(res, "token requests per resource per hour, "+window, func(r peerResult) float64 { return r.perResourceHour(r.tokens) }, num),
		sideBySide(res, fmt.Sprintf("manager memory, peak RSS of the process (%d objects)", ref.objects), func(r peerResult) float64 { return float64(r.peakRSS) }, mib),
		sideBySide(res, "manager memory, peak anonymous RSS (heap and stacks; sampled every 0.5 s)", func(r peerResult) float64 { return float64(r.peakAnon) }, mib),
	)
}

// serviceWorkload is the sample app's services, -manager-service-sets times, under one
// ResourceGroup: what ASO users write for a PostgreSQL server, a cache and a blob container.
func serviceWorkload(_ *managerEnv, ns, group string) benchWorkload {
	const (
		pg      = "dbforpostgresql.azure.com/v1api20240801"
		cache   = "cache.azure.com/v1api20230801" // the newest ASO v2.13 serves; Cerulean serves it too
		storage = "storage.azure.com/v1api20230101"
	)
	obj := func(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
		}}
	}
	owner := func(name string) map[string]any { return map[string]any{"name": name} }
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "pg-admin", "namespace": ns},
		"stringData": map[string]any{"password": "Bench-admin-pw-1"}, //nolint:gosec // the password of a throwaway server in the bench's own cloud
	}}
	wl := benchWorkload{sets: *mgrServiceSets, timeline: true, prereqs: []*unstructured.Unstructured{secret},
		objs: []*unstructured.Unstructured{obj("resources.azure.com/v1api20200601", "ResourceGroup", group, map[string]any{"location": "westus2"})}}
	for i := range *mgrServiceSets {
		server, redis, account := fmt.Sprintf("pg-%02d", i), fmt.Sprintf("cache-%02d", i), fmt.Sprintf("sa-%02d", i)
		wl.objs = append(wl.objs,
			obj(pg, "FlexibleServer", server, map[string]any{
				"owner": owner(group), "azureName": fmt.Sprintf("%s-%s", ns, server), "location": "westus2", "version": "15",
				"administratorLogin": "pgadmin", "administratorLoginPassword": map[string]any{"name": "pg-admin", "key": "password"},
				"sku": map[string]any{"name": "Standard_B1ms", "tier": "Burstable"}, "storage": map[string]any{"storageSizeGB": 32},
			}),
			obj(pg, "FlexibleServersDatabase", server+"-app", map[string]any{"owner": owner(server), "azureName": "app", "charset": "UTF8"}),
			obj(pg, "FlexibleServersFirewallRule", server+"-pods", map[string]any{"owner": owner(server), "azureName": "pods",
				"startIpAddress": "10.0.0.0", "endIpAddress": "10.255.255.255"}),
			obj(cache, "Redis", redis, map[string]any{
				"owner": owner(group), "azureName": fmt.Sprintf("%s-%s", ns, redis), "location": "westus2",
				"sku": map[string]any{"name": "Basic", "family": "C", "capacity": 0},
			}),
			obj(storage, "StorageAccount", account, map[string]any{
				"owner": owner(group), "azureName": fmt.Sprintf("bench%s%02d", ns[len("bench-"):], i), "location": "westus2",
				"kind": "StorageV2", "sku": map[string]any{"name": "Standard_LRS"},
			}),
			obj(storage, "StorageAccountsBlobService", account+"-blobs", map[string]any{"owner": owner(account)}),
			obj(storage, "StorageAccountsBlobServicesContainer", account+"-uploads", map[string]any{"owner": owner(account + "-blobs"), "azureName": "uploads"}),
		)
	}
	seen := map[schema.GroupVersionResource]bool{}
	for _, u := range wl.objs { // owners come first in objs, so their kinds do here
		if gvr := gvrOf(u); !seen[gvr] {
			seen[gvr] = true
			wl.gvrs = append(wl.gvrs, gvr)
		}
	}
	return wl
}
