package devenv_test

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v5"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

// A pod reaches a PostgreSQL flexible server and a Redis cache created through ARM by their
// Azure names, with pgx and go-redis at their defaults but for the cloud's CA: CoreDNS forwards
// Azure's zones to the cloud's DNS, which answers each engine's own address in
// devenv.EngineCIDR (a range the cloud makes local to the host, so the pod's packets reach it
// with the pod's own address, which the server's and the cache's firewall rules then judge). A
// pod outside every firewall rule is refused, as Azure refuses it.
func TestPodReachesDataPlanesUnderAzureNames(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	devenvtest.Node(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	c := cloudtest.Start(t, cloud.Options{ProxyAddr: "0", ARM: cloudtest.FastARM(), EngineNet: netip.MustParsePrefix(devenv.EngineCIDR)})
	if err := c.ServeHTTPSOn(devenv.CloudHTTPSAddr); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ServeDNSOn(devenv.CloudDNSAddr); err != nil {
		t.Fatal(err)
	}
	s := c.Settings()
	owner := cloudtest.OwnerCred(t, c)
	armOpts := cloudtest.ARMOptions(c)
	const rg, pgName, cacheName, password = "rg-dial", "pg-dial", "cache-dial", "Dial-pw-123"
	cloudtest.CreateGroup(t, c, owner, armOpts, "eastus", rg)

	servers, err := armpostgresqlflexibleservers.NewServersClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	pgPoller, err := servers.BeginCreateOrUpdate(ctx, rg, pgName, armpostgresqlflexibleservers.Server{
		Location: to.Ptr("eastus"),
		SKU:      &armpostgresqlflexibleservers.SKU{Name: to.Ptr("Standard_B1ms"), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTierBurstable)},
		Properties: &armpostgresqlflexibleservers.ServerProperties{
			AdministratorLogin: to.Ptr("appadmin"), AdministratorLoginPassword: to.Ptr(password),
			Version: to.Ptr(armpostgresqlflexibleservers.PostgresMajorVersion("16")),
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgPoller.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	caches, err := armredis.NewClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	cachePoller, err := caches.BeginCreate(ctx, rg, cacheName, armredis.CreateParameters{Location: to.Ptr("eastus"), Properties: &armredis.CreateProperties{
		SKU: &armredis.SKU{Name: to.Ptr(armredis.SKUNameBasic), Family: to.Ptr(armredis.SKUFamilyC), Capacity: to.Ptr[int32](0)},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cachePoller.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	keys, err := caches.ListKeys(ctx, rg, cacheName, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{pgName + ".postgres.database.azure.com", cacheName + ".redis.cache.windows.net"} {
		if a, ok := c.LookupDataPlane(host); !ok || !netip.MustParsePrefix(devenv.EngineCIDR).Contains(a) {
			t.Fatalf("%s is at %v (%t), want an address in %s", host, a, ok, devenv.EngineCIDR)
		}
	}

	const ns = "dataplanes"
	createNamespace(t, cs, ns)
	publishCloudCA(t, cs, ns, s.CAFile)
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "conn"}, StringData: map[string]string{
		"PGPASSWORD": password,
		// The key is base64: '/' and '+' must be escaped in a URL's userinfo.
		"REDIS_URL": (&url.URL{Scheme: "rediss", User: url.UserPassword("", *keys.PrimaryKey), Host: cacheName + ".redis.cache.windows.net:6380", Path: "/0"}).String(),
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dialPod := func(name string, redis bool) *corev1.Pod {
		pod := testPod(name, "dial")
		pod.Namespace = ns
		app := &pod.Spec.Containers[0]
		secret := func(key string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "conn"}, Key: key}}
		}
		app.Env = []corev1.EnvVar{
			{Name: "PG_DSN", Value: "host=" + pgName + ".postgres.database.azure.com user=appadmin dbname=postgres sslmode=verify-full"},
			{Name: "PGPASSWORD", ValueFrom: secret("PGPASSWORD")},
		}
		if redis {
			app.Env = append(app.Env, corev1.EnvVar{Name: "REDIS_URL", ValueFrom: secret("REDIS_URL")})
		}
		trustCloudCA(pod)
		return pod
	}

	// No firewall rule yet: PostgreSQL refuses the pod's address, as Azure's servers do.
	refused := dialPod("dial-refused", false)
	createPod(t, cs, refused)
	got := waitPhase(t, cs, ns, refused.Name, corev1.PodSucceeded, corev1.PodFailed)
	out := kubectl(t, cp, "-n", ns, "logs", refused.Name)
	if got.Status.Phase != corev1.PodFailed || !strings.Contains(out, "no pg_hba.conf entry for host") {
		t.Fatalf("a pod outside every firewall rule: %s\n%s", podStatus(got), out)
	}

	rules, err := armpostgresqlflexibleservers.NewFirewallRulesClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	rulePoller, err := rules.BeginCreateOrUpdate(ctx, rg, pgName, "pods", armpostgresqlflexibleservers.FirewallRule{
		Properties: &armpostgresqlflexibleservers.FirewallRuleProperties{StartIPAddress: to.Ptr("10.244.0.0"), EndIPAddress: to.Ptr("10.244.0.255")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rulePoller.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}

	// A cache's firewall judges the pod's own address too: a rule outside the pod network
	// refuses the pod at connect; the rule widened to it admits it, without a restart.
	redisRules, err := armredis.NewFirewallRulesClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	setRedisRule := func(start, end string) {
		t.Helper()
		if _, err := redisRules.CreateOrUpdate(ctx, rg, cacheName, "pods", armredis.FirewallRule{
			Properties: &armredis.FirewallRuleProperties{StartIP: to.Ptr(start), EndIP: to.Ptr(end)},
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	setRedisRule("10.9.0.0", "10.9.0.255")
	refused = dialPod("dial-redis-refused", true)
	app := &refused.Spec.Containers[0]
	app.Env = slices.DeleteFunc(app.Env, func(e corev1.EnvVar) bool { return strings.HasPrefix(e.Name, "PG") }) // Redis only
	createPod(t, cs, refused)
	got = waitPhase(t, cs, ns, refused.Name, corev1.PodSucceeded, corev1.PodFailed)
	out = kubectl(t, cp, "-n", ns, "logs", refused.Name)
	if got.Status.Phase != corev1.PodFailed || !strings.Contains(out, "redis: ") || !strings.Contains(out, "connection reset by peer") {
		t.Fatalf("a pod outside the cache's firewall rules: %s\n%s", podStatus(got), out)
	}
	setRedisRule("10.9.0.0", "10.244.0.255")
	out = runToEnd(t, cs, cp, dialPod("dial", true))
	if want := "postgres ok rows 1 ssl true\nredis ok get from-the-pod tls true\n"; out != want {
		t.Errorf("the pod's dial printed %q, want %q", out, want)
	}
	for _, secret := range []string{password, *keys.PrimaryKey} {
		if strings.Contains(out, secret) {
			t.Error("the pod printed a secret")
		}
	}
}
