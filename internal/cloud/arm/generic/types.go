package generic

// The table of the types this provider answers for. Versions are the api-versions of each
// provider's published REST specifications (azure-rest-api-specs, the resource-manager readme
// of each namespace), oldest first, so the last is the newest.

var (
	serviceBusVersions = []string{
		"2015-08-01", "2017-04-01", "2018-01-01-preview", "2021-01-01-preview", "2021-06-01-preview", "2021-11-01",
		"2022-01-01-preview", "2022-10-01-preview", "2023-01-01-preview", "2024-01-01", "2025-05-01-preview", "2026-01-01",
	}
	eventHubVersions = []string{
		"2014-09-01", "2015-08-01", "2017-04-01", "2018-01-01-preview", "2021-01-01-preview", "2021-06-01-preview",
		"2021-11-01", "2022-01-01-preview", "2022-10-01-preview", "2023-01-01-preview", "2024-01-01", "2024-05-01-preview",
	}
	cosmosVersions = []string{
		"2015-04-08", "2019-08-01", "2019-12-12", "2020-03-01", "2020-04-01", "2020-09-01", "2021-01-15",
		"2021-03-15", "2021-04-15", "2021-05-15", "2021-06-15", "2021-10-15", "2021-10-15-preview", "2022-05-15",
		"2022-08-15", "2022-11-15", "2023-03-15", "2023-04-15", "2023-09-15", "2023-11-15", "2024-05-15",
		"2024-08-15", "2024-11-15", "2025-04-15", "2025-10-15",
	}
	networkVersions = []string{
		"2018-08-01", "2018-10-01", "2018-11-01", "2018-12-01", "2019-02-01", "2019-04-01", "2019-06-01",
		"2019-07-01", "2019-08-01", "2019-09-01", "2019-11-01", "2019-12-01", "2020-03-01", "2020-04-01",
		"2020-05-01", "2020-06-01", "2020-07-01", "2020-08-01", "2020-11-01", "2021-02-01", "2021-03-01",
		"2021-05-01", "2021-08-01", "2022-01-01", "2022-05-01", "2022-07-01", "2022-09-01", "2022-11-01",
		"2023-02-01", "2023-04-01", "2023-05-01", "2023-06-01", "2023-09-01", "2023-11-01", "2024-01-01",
		"2024-03-01", "2024-05-01", "2024-07-01", "2024-10-01", "2025-01-01", "2025-03-01", "2025-05-01",
	}
	privateDNSVersions = []string{"2018-09-01", "2020-01-01", "2020-06-01", "2024-06-01"}
	registryVersions   = []string{
		"2017-03-01", "2017-10-01", "2019-05-01", "2019-12-01-preview", "2020-11-01-preview", "2021-06-01-preview",
		"2021-08-01-preview", "2021-09-01", "2021-12-01-preview", "2022-02-01-preview", "2022-12-01",
		"2023-01-01-preview", "2023-06-01-preview", "2023-07-01", "2023-08-01-preview", "2023-11-01-preview",
		"2024-11-01-preview", "2025-03-01-preview", "2025-04-01", "2025-05-01-preview",
	}
	componentVersions = []string{"2015-05-01", "2018-05-01-preview", "2020-02-02", "2020-02-02-preview"}
	workspaceVersions = []string{
		"2015-03-20", "2015-11-01-preview", "2020-03-01-preview", "2020-08-01", "2020-10-01", "2021-06-01",
		"2021-12-01-preview", "2022-10-01", "2023-09-01", "2025-02-01", "2025-07-01", "2026-03-01",
	}
)

// kind is one resource type and how the real provider answers for it.
type kind struct {
	Type     string
	Versions []string
	// LRO: a PUT answers with Azure-AsyncOperation and provisions in the background, as the
	// real provider does (its SDK method is a Begin... poller); else the PUT is synchronous.
	LRO bool
	// CreatedStatus is a create's status: 0 = 201; 200 where the real provider (and so its
	// SDK) answers 200 to a create.
	CreatedStatus int
	// AsyncDelete: DELETE answers 202 and deletes in a long-running operation; else 200/204.
	AsyncDelete bool
	// Keys is the key material the resource carries and its POST actions (nil: none).
	Keys *keyStyle
	// RootRule: creating the namespace also creates its RootManageSharedAccessKey rule, as
	// Service Bus and Event Hubs do.
	RootRule string
	// Computed adds the read-only properties the real provider reports (endpoints, ids).
	Computed func(r view, props map[string]any)
}

// kinds lists every type, parents before their children.
var kinds = []kind{
	// Microsoft.ServiceBus
	{Type: "Microsoft.ServiceBus/namespaces", Versions: serviceBusVersions, LRO: true, AsyncDelete: true,
		RootRule: "Microsoft.ServiceBus/namespaces/authorizationRules", Computed: busEndpoint},
	{Type: "Microsoft.ServiceBus/namespaces/authorizationRules", Versions: serviceBusVersions, CreatedStatus: 200, Keys: sasKeys},
	{Type: "Microsoft.ServiceBus/namespaces/queues", Versions: serviceBusVersions, CreatedStatus: 200, Computed: entityStatus},
	{Type: "Microsoft.ServiceBus/namespaces/queues/authorizationRules", Versions: serviceBusVersions, CreatedStatus: 200, Keys: sasKeys},
	{Type: "Microsoft.ServiceBus/namespaces/topics", Versions: serviceBusVersions, CreatedStatus: 200, Computed: entityStatus},
	{Type: "Microsoft.ServiceBus/namespaces/topics/authorizationRules", Versions: serviceBusVersions, CreatedStatus: 200, Keys: sasKeys},
	{Type: "Microsoft.ServiceBus/namespaces/topics/subscriptions", Versions: serviceBusVersions, CreatedStatus: 200, Computed: entityStatus},
	{Type: "Microsoft.ServiceBus/namespaces/topics/subscriptions/rules", Versions: serviceBusVersions, CreatedStatus: 200},
	// Microsoft.EventHub
	{Type: "Microsoft.EventHub/namespaces", Versions: eventHubVersions, LRO: true, AsyncDelete: true,
		RootRule: "Microsoft.EventHub/namespaces/authorizationRules", Computed: busEndpoint},
	{Type: "Microsoft.EventHub/namespaces/authorizationRules", Versions: eventHubVersions, CreatedStatus: 200, Keys: sasKeys},
	{Type: "Microsoft.EventHub/namespaces/eventhubs", Versions: eventHubVersions, CreatedStatus: 200, Computed: entityStatus},
	{Type: "Microsoft.EventHub/namespaces/eventhubs/authorizationRules", Versions: eventHubVersions, CreatedStatus: 200, Keys: sasKeys},
	{Type: "Microsoft.EventHub/namespaces/eventhubs/consumergroups", Versions: eventHubVersions, CreatedStatus: 200},
	// Microsoft.DocumentDB
	{Type: "Microsoft.DocumentDB/databaseAccounts", Versions: cosmosVersions, LRO: true, CreatedStatus: 200, AsyncDelete: true,
		Keys: cosmosKeys, Computed: cosmosEndpoint},
	{Type: "Microsoft.DocumentDB/databaseAccounts/sqlDatabases", Versions: cosmosVersions, LRO: true, CreatedStatus: 200, AsyncDelete: true},
	{Type: "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers", Versions: cosmosVersions, LRO: true, CreatedStatus: 200, AsyncDelete: true},
	{Type: "Microsoft.DocumentDB/databaseAccounts/mongodbDatabases", Versions: cosmosVersions, LRO: true, CreatedStatus: 200, AsyncDelete: true},
	{Type: "Microsoft.DocumentDB/databaseAccounts/mongodbDatabases/collections", Versions: cosmosVersions, LRO: true, CreatedStatus: 200, AsyncDelete: true},
	// Microsoft.Network
	{Type: "Microsoft.Network/virtualNetworks", Versions: networkVersions, LRO: true, AsyncDelete: true, Keys: guidOnly, Computed: resourceGUID},
	{Type: "Microsoft.Network/virtualNetworks/subnets", Versions: networkVersions, LRO: true, AsyncDelete: true},
	{Type: "Microsoft.Network/networkSecurityGroups", Versions: networkVersions, LRO: true, AsyncDelete: true, Keys: guidOnly, Computed: resourceGUID},
	{Type: "Microsoft.Network/networkSecurityGroups/securityRules", Versions: networkVersions, LRO: true, AsyncDelete: true},
	{Type: "Microsoft.Network/publicIPAddresses", Versions: networkVersions, LRO: true, AsyncDelete: true, Keys: guidOnly, Computed: resourceGUID},
	{Type: "Microsoft.Network/privateDnsZones", Versions: privateDNSVersions, LRO: true, AsyncDelete: true},
	{Type: "Microsoft.Network/privateDnsZones/virtualNetworkLinks", Versions: privateDNSVersions, LRO: true, AsyncDelete: true},
	// Microsoft.ContainerRegistry
	{Type: "Microsoft.ContainerRegistry/registries", Versions: registryVersions, LRO: true, AsyncDelete: true,
		Keys: registryKeys, Computed: loginServer},
	// Microsoft.Insights
	{Type: "Microsoft.Insights/components", Versions: componentVersions, CreatedStatus: 200, Keys: componentKeys, Computed: instrumentation},
	// Microsoft.OperationalInsights
	{Type: "Microsoft.OperationalInsights/workspaces", Versions: workspaceVersions, LRO: true, AsyncDelete: true,
		Keys: workspaceKeys, Computed: customerID},
}
