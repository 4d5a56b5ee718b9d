package main

import "testing"

func TestARMTypeIsThePathsLastResourceType(t *testing.T) {
	for path, want := range map[string]string{
		"/subscriptions/s/resourceGroups/rg": "resourcegroups",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.DBforPostgreSQL/flexibleServers/pg":               "flexibleservers",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.DBforPostgreSQL/flexibleServers/pg/databases/app": "databases",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/sa/listKeys":              "", // an action
		"/subscriptions/s": "",
	} {
		if got := armType(path); got != want {
			t.Errorf("armType(%s) = %q, want %q", path, got, want)
		}
	}
}
