// The JavaScript SDK with no option at all: DefaultAzureCredential, the ARM clients of the
// public cloud, a SecretClient with challenge verification on. Only the environment (HTTPS_PROXY,
// which the SDK's pipeline reads, NODE_EXTRA_CA_CERTS and AZURE_*) points it at the local
// cloud's proxy. Prints what it saw as JSON for the Go test (never a token or the secret of a
// principal).
import { DefaultAzureCredential } from "@azure/identity";
import { ResourceManagementClient } from "@azure/arm-resources";
import { ManagedServiceIdentityClient } from "@azure/arm-msi";
import { KeyVaultManagementClient } from "@azure/arm-keyvault";
import { SecretClient } from "@azure/keyvault-secrets";

const [group, vaultName, objectId] = process.argv.slice(2);
const env = process.env;
const sub = env.AZURE_SUBSCRIPTION_ID;
const credential = new DefaultAzureCredential();

const resources = new ResourceManagementClient(credential, sub);
const g = await resources.resourceGroups.createOrUpdate(group, { location: "westeurope" });
const msi = new ManagedServiceIdentityClient(credential, sub);
const id = await msi.userAssignedIdentities.createOrUpdate(group, "app-js", { location: "westeurope" });
const kv = new KeyVaultManagementClient(credential, sub);
const vault = await kv.vaults.beginCreateOrUpdateAndWait(group, vaultName, {
  location: "westeurope",
  properties: {
    tenantId: env.AZURE_TENANT_ID,
    sku: { family: "A", name: "standard" },
    accessPolicies: [{ tenantId: env.AZURE_TENANT_ID, objectId, permissions: { secrets: ["all"] } }],
  },
});
const secrets = new SecretClient(vault.properties.vaultUri, credential);
const set = await secrets.setSecret("db-password", "js-s3cret");
const got = await secrets.getSecret("db-password");
console.log(JSON.stringify({
  groupId: g.id, identityClientId: id.clientId, vaultUri: vault.properties.vaultUri,
  secretId: set.properties.id, secretValue: got.value,
}));
