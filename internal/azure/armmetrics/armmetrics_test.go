package armmetrics_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cerulean/cerulean/internal/azure/armmetrics"
)

// token is a credential that needs no identity provider: this test is about requests that never
// reach ARM.
type token struct{}

func (token) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "t", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// A request that gets no answer (nothing listens) counts in azure_failed_requests_total under
// its resource type and method, is timed, and is not counted as answered.
func TestUnansweredRequestCountsAsFailed(t *testing.T) {
	armmetrics.Register()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "https://" + l.Addr().String()
	l.Close()
	opts := armmetrics.With(&arm.ClientOptions{ClientOptions: policy.ClientOptions{
		Cloud: cloud.Configuration{Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: endpoint, Audience: "https://management.core.windows.net/"}}},
		Retry: policy.RetryOptions{MaxRetries: -1}, // one attempt
	}})
	groups, err := armresources.NewResourceGroupsClient("00000000-0000-0000-0000-000000000000", token{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups.Get(t.Context(), "unreachable-rg", nil); err == nil {
		t.Fatal("a Get without a server succeeded")
	}
	const want = `
# HELP azure_failed_requests_total Total number of requests to Azure that got no response (connection or timeout errors).
# TYPE azure_failed_requests_total counter
azure_failed_requests_total{requestType="GET",resource="Microsoft.Resources/resourceGroups"} 1
`
	if err := testutil.GatherAndCompare(metrics.Registry, strings.NewReader(want), "azure_failed_requests_total"); err != nil {
		t.Error(err)
	}
	if n := count(t, "azure_successful_requests_total"); n != 0 {
		t.Errorf("%d series of answered requests", n)
	}
}

func count(t *testing.T, name string) int {
	t.Helper()
	n, err := testutil.GatherAndCount(metrics.Registry, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
