package generic_test

import (
	"slices"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud/arm/generic"
)

// TestVersions: every type's list is in order (the route-table tests take the last as the
// newest) and holds the versions the pinned SDK modules send and those of ASO v2's kinds
// (v1api20210101preview and so on).
func TestVersions(t *testing.T) {
	for _, typ := range generic.Types() {
		if v := generic.Versions(typ); len(v) == 0 || !slices.IsSorted(v) {
			t.Errorf("%s: versions %v not sorted", typ, v)
		}
	}
	for typ, want := range map[string][]string{
		"Microsoft.ServiceBus/namespaces":                    {"2021-11-01", "2021-01-01-preview", "2022-10-01-preview"}, // armservicebus v1.2.0, ASO
		"Microsoft.EventHub/namespaces":                      {"2024-01-01", "2021-11-01"},                               // armeventhub v1.3.0, ASO
		"Microsoft.DocumentDB/databaseAccounts":              {"2025-10-15", "2021-05-15", "2023-11-15"},                 // armcosmos v3.4.0, ASO
		"Microsoft.Network/virtualNetworks/subnets":          {"2025-01-01", "2020-11-01", "2022-07-01", "2024-03-01"},   // armnetwork v7.2.0, ASO
		"Microsoft.Network/privateDnsZones":                  {"2018-09-01", "2020-06-01", "2024-06-01"},                 // ASO
		"Microsoft.ContainerRegistry/registries":             {"2021-09-01", "2023-07-01"},                               // ASO
		"Microsoft.Insights/components":                      {"2020-02-02"},                                             // ASO
		"Microsoft.OperationalInsights/workspaces":           {"2021-06-01", "2022-10-01"},                               // ASO
		"Microsoft.ServiceBus/namespaces/queues":             {"2021-11-01"},
		"Microsoft.EventHub/namespaces/eventhubs":            {"2024-01-01"},
		"Microsoft.DocumentDB/databaseAccounts/sqlDatabases": {"2025-10-15"},
	} {
		got := generic.Versions(typ)
		for _, v := range want {
			if !slices.Contains(got, v) {
				t.Errorf("%s does not accept %s", typ, v)
			}
		}
	}
	if generic.Versions("Microsoft.Nope/things") != nil {
		t.Error("an unknown type has versions")
	}
}
