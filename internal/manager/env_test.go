package manager_test

import (
	"testing"

	"github.com/cerulean/cerulean/internal/manager"
)

// The Helm chart runs the manager with workload identity as its own credential: the client id,
// USE_WORKLOAD_IDENTITY_AUTH=true and the projected token file, and no secret.
func TestFromEnvWorkloadIdentity(t *testing.T) {
	env := map[string]string{
		"AZURE_TENANT_ID": "t", "AZURE_SUBSCRIPTION_ID": "s", "AZURE_CLIENT_ID": "c",
		"USE_WORKLOAD_IDENTITY_AUTH": "true", "AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/azure-identity-token",
	}
	var opts manager.Options
	if err := manager.FromEnv(&opts, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	g := opts.GlobalCredential
	if g == nil || !g.WorkloadIdentity || g.ClientID != "c" || g.TenantID != "t" || g.SubscriptionID != "s" || g.FederatedTokenFile != env["AZURE_FEDERATED_TOKEN_FILE"] {
		t.Fatalf("global credential = %+v, want workload identity of client c with the token file", g)
	}

	delete(env, "AZURE_SUBSCRIPTION_ID")
	if err := manager.FromEnv(&manager.Options{}, func(k string) string { return env[k] }); err == nil {
		t.Error("workload identity without a subscription was accepted")
	}
	env["USE_WORKLOAD_IDENTITY_AUTH"], env["AZURE_CLIENT_SECRET"] = "", "hunter2"
	opts = manager.Options{}
	if err := manager.FromEnv(&opts, func(k string) string { return env[k] }); err != nil || opts.GlobalCredential != nil {
		t.Errorf("without workload identity: %+v, %v; want the credential left to azure.Config", opts.GlobalCredential, err)
	}
}
