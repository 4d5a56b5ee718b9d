// Gets tokens from the local cloud with @azure/identity, unmodified: a client secret, the
// certificate, and a workload-identity token file. Prints the tokens as JSON for the Go test to
// verify (they never reach a log).
import { ClientSecretCredential, ClientCertificateCredential, WorkloadIdentityCredential } from "@azure/identity";

const env = process.env;
const options = { authorityHost: env.AZURE_AUTHORITY_HOST, disableInstanceDiscovery: true };
const secret = new ClientSecretCredential(env.AZURE_TENANT_ID, env.AZURE_CLIENT_ID, env.AZURE_CLIENT_SECRET, options);
const certificate = new ClientCertificateCredential(env.AZURE_TENANT_ID, env.AZURE_CLIENT_ID,
  { certificatePath: env.AZURE_CLIENT_CERTIFICATE_PATH }, options);
const workload = new WorkloadIdentityCredential({ ...options, tenantId: env.AZURE_TENANT_ID,
  clientId: env.WORKLOAD_CLIENT_ID, tokenFilePath: env.AZURE_FEDERATED_TOKEN_FILE });

const out = {
  // The JavaScript SDK's default ARM scope.
  secret: (await secret.getToken("https://management.azure.com/.default")).token,
  certificate: (await certificate.getToken("https://vault.azure.net/.default")).token,
  workload: (await workload.getToken("https://vault.azure.net/.default")).token,
};
console.log(JSON.stringify(out));
