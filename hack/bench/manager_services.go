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
	register(section{title: "Manager: the service kinds (PostgreSQL, Redis, storage)", run: benchServiceKinds})
}

// Each set starts a real PostgreSQL and a real Redis in the cloud: a few sets are the load a
// 2-core machine carries.
var mgrServiceSets = flag.Int("manager-service-sets", 3, "service kinds section: sets of FlexibleServer + database + firewall rule, Redis, StorageAccount + blob service + container")

// benchServiceKinds runs the service kinds' workload under Cerulean's manager alone (see
// docs/benchmarks.md for why ASO is not beside it) and reports time to Ready, steady-state ARM
// traffic per resource and hour, and peak RSS.
func benchServiceKinds(ctx context.Context, env benchEnv) ([]row, error) {
	me, err := startManagerEnv(ctx, env, "services")
	if err != nil {
		return nil, err
	}
	defer me.stop()
	p := ceruleanManager(me)
	fmt.Fprintf(os.Stderr, "  %s: %d service sets…\n", p.name, *mgrServiceSets)
	r, err := runPeer(ctx, me, p, serviceWorkload)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", p.name, err)
	}
	fmt.Fprintf(os.Stderr, "  %s: %+v\n", p.name, r)
	return serviceRows(r), nil
}

func serviceRows(r peerResult) []row {
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	window := fmt.Sprintf("sync period %s, %d periods of steady state, scaled to an hour", *mgrSync, *mgrPeriods)
	rows := []row{
		{benchmark: fmt.Sprintf("time to Ready, %d sets of FlexibleServer + database + firewall rule, Redis, StorageAccount + blob service + container, and their ResourceGroup (%d objects; cap %s)",
			r.pairs, r.objects, *mgrCap), result: "Cerulean " + r.readyIn.Round(100*time.Millisecond).String()},
	}
	if r.ready != r.objects {
		rows = append(rows, row{benchmark: "objects Ready within the cap", result: fmt.Sprintf("Cerulean %d/%d", r.ready, r.objects)})
	}
	return append(rows,
		row{benchmark: "ARM writes (PUT, PATCH, POST, DELETE) per resource per hour, " + window, result: "Cerulean " + num(r.perResourceHour(r.writes))},
		row{benchmark: "ARM reads (GET) per resource per hour, " + window, result: "Cerulean " + num(r.perResourceHour(r.reads))},
		row{benchmark: "token requests per resource per hour, " + window, result: "Cerulean " + num(r.perResourceHour(r.tokens))},
		row{benchmark: fmt.Sprintf("manager memory, peak RSS of the process (%d objects)", r.objects), result: fmt.Sprintf("Cerulean %.0f MiB", float64(r.peakRSS)/(1<<20))},
		row{benchmark: "manager memory, peak anonymous RSS (heap and stacks; sampled every 0.5 s)", result: fmt.Sprintf("Cerulean %.0f MiB", float64(r.peakAnon)/(1<<20))},
	)
}

// serviceWorkload is the sample app's services, -manager-service-sets times, under one
// ResourceGroup: what ASO users write for a PostgreSQL server, a cache and a blob container.
func serviceWorkload(_ *managerEnv, ns, group string) benchWorkload {
	const (
		pg      = "dbforpostgresql.azure.com/v1api20240801"
		cache   = "cache.azure.com/v1api20241101"
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
	wl := benchWorkload{sets: *mgrServiceSets, prereqs: []*unstructured.Unstructured{secret},
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
