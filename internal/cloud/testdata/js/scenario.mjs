// A whole scenario against the local cloud with the JavaScript SDKs, unmodified: a resource
// group, a user-assigned identity with a federated credential, a vault in RBAC mode, the role
// "Key Vault Secrets Officer" for the identity at the vault, a secret set and read back by the
// identity (workload identity), and the group deleted. Prints what the Go test checks as JSON.
//
// Options the local cloud needs (docs/cloud.md, "JavaScript"): authorityHost and
// disableInstanceDiscovery for @azure/identity; the ARM endpoint and the ARM scope for the
// management clients (their default scope is derived from the endpoint, which is not an ARM
// audience here); disableChallengeResourceVerification for the secrets client; the CA through
// NODE_EXTRA_CA_CERTS.
import { randomUUID } from "node:crypto";
import { ClientSecretCredential, WorkloadIdentityCredential } from "@azure/identity";
import { ResourceManagementClient } from "@azure/arm-resources";
import { ManagedServiceIdentityClient } from "@azure/arm-msi";
import { KeyVaultManagementClient } from "@azure/arm-keyvault";
import { AuthorizationManagementClient } from "@azure/arm-authorization";
import { SecretClient } from "@azure/keyvault-secrets";

const env = process.env;
const tenantId = env.AZURE_TENANT_ID;
const subscriptionId = env.AZURE_SUBSCRIPTION_ID;
const identityOptions = { authorityHost: env.AZURE_AUTHORITY_HOST, disableInstanceDiscovery: true };
const owner = new ClientSecretCredential(tenantId, env.AZURE_CLIENT_ID, env.AZURE_CLIENT_SECRET, identityOptions);

const armScope = "https://management.azure.com/.default";
const endpoint = env.AZURE_RESOURCE_MANAGER_ENDPOINT;
// Clients generated from TypeSpec (@azure/arm-resources 8, @azure/arm-keyvault 5) take
// credentials.scopes; the older generation (@azure/arm-msi 2, @azure/arm-authorization 9)
// takes credentialScopes.
const typeSpecOptions = { endpoint, credentials: { scopes: [armScope] } };
const classicOptions = { endpoint, credentialScopes: [armScope] };
const poll = { updateIntervalInMs: 100 };

const resources = new ResourceManagementClient(owner, subscriptionId, typeSpecOptions);
const msi = new ManagedServiceIdentityClient(owner, subscriptionId, classicOptions);
const keyVaults = new KeyVaultManagementClient(owner, subscriptionId, typeSpecOptions);
const authorization = new AuthorizationManagementClient(owner, subscriptionId, classicOptions);

const group = env.SCENARIO_GROUP;
const location = "eastus";
const out = {};

out.groupId = (await resources.resourceGroups.createOrUpdate(group, { location })).id;

const identity = await msi.userAssignedIdentities.createOrUpdate(group, "app", { location });
out.identityId = identity.id;
out.principalId = identity.principalId;
out.clientId = identity.clientId;
await msi.federatedIdentityCredentials.createOrUpdate(group, "app", "kube", {
  issuer: env.SCENARIO_ISSUER, subject: env.SCENARIO_SUBJECT, audiences: ["api://AzureADTokenExchange"],
});

const vault = await keyVaults.vaults.createOrUpdate(group, env.SCENARIO_VAULT, {
  location,
  properties: { tenantId, sku: { family: "A", name: "standard" }, enableRbacAuthorization: true },
}, poll);
out.vaultId = vault.id;
out.vaultUri = vault.properties.vaultUri;

const workload = new WorkloadIdentityCredential({
  ...identityOptions, tenantId, clientId: identity.clientId, tokenFilePath: env.AZURE_FEDERATED_TOKEN_FILE,
});
const secrets = new SecretClient(vault.properties.vaultUri, workload, { disableChallengeResourceVerification: true });

// Without a role the identity may not write secrets.
try {
  await secrets.setSecret("db-password", env.SCENARIO_SECRET);
  out.withoutRole = 200;
} catch (err) {
  out.withoutRole = err.statusCode ?? String(err);
}

let officer;
for await (const d of authorization.roleDefinitions.list(vault.id, { filter: "roleName eq 'Key Vault Secrets Officer'" })) {
  officer = d;
}
// The scope starts with "/": this SDK sends PUT https://HOST//subscriptions/...
const assignment = await authorization.roleAssignments.create(vault.id, randomUUID(), {
  roleDefinitionId: officer.id, principalId: identity.principalId, principalType: "ServicePrincipal",
});
out.roleAssignmentId = assignment.id;
out.roleAssignmentScope = assignment.scope;

const set = await secrets.setSecret("db-password", env.SCENARIO_SECRET);
const got = await secrets.getSecret("db-password");
out.secretVersion = set.properties.version;
out.secretVersionRead = got.properties.version;
out.secretValue = got.value;

await resources.resourceGroups.delete(group, poll);
out.groupExistsAfterDelete = (await resources.resourceGroups.checkExistence(group)).body;

console.log(JSON.stringify(out));
