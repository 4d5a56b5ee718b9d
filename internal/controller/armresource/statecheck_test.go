package armresource

import "testing"

func TestStateCheckBlocks(t *testing.T) {
	server := stateCheck{field: "state", allowed: flexibleServerStates}
	cluster := stateCheck{field: "provisioningState", allowed: clusterStates}
	for _, tc := range []struct {
		c     stateCheck
		state string
		want  bool
	}{
		{server, "Ready", false}, {server, "Stopped", true}, {server, "Starting", true}, {server, "Updating", true},
		{server, "", false}, {server, "Failed", false},
		{cluster, "Succeeded", false}, {cluster, "Updating", true}, {cluster, "Upgrading", true}, {cluster, "canceled", false},
		{cluster, "Ready", true},
	} {
		if got := tc.c.blocks(tc.state); got != tc.want {
			t.Errorf("%s %q blocks = %t, want %t", tc.c.field, tc.state, got, tc.want)
		}
	}
	if got := parentID("/subscriptions/s/resourceGroups/rg/providers/Microsoft.DBforPostgreSQL/flexibleServers/pg/databases/app"); got != "/subscriptions/s/resourceGroups/rg/providers/Microsoft.DBforPostgreSQL/flexibleServers/pg" {
		t.Errorf("parentID = %s", got)
	}
}
