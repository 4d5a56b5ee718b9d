// Keys and certificates of a vault of the local cloud with the JavaScript SDKs, unmodified and
// with their default options (plus disableChallengeResourceVerification, as for secrets): a key
// created, used to sign, verify, encrypt, decrypt, wrap and unwrap through CryptographyClient
// (which does the public-key half locally), and the refusals of bad input; a self-signed
// certificate, its secret, and a PFX import with a wrong password. KEYS_VAULT_URI names a vault
// where the bootstrap principal is Key Vault Administrator. Prints what the Go test checks.
import { createHash } from "node:crypto";
import { ClientSecretCredential } from "@azure/identity";
import { KeyClient, CryptographyClient } from "@azure/keyvault-keys";
import { CertificateClient, WellKnownIssuer } from "@azure/keyvault-certificates";
import { SecretClient } from "@azure/keyvault-secrets";

const env = process.env;
const cred = new ClientSecretCredential(env.AZURE_TENANT_ID, env.AZURE_CLIENT_ID, env.AZURE_CLIENT_SECRET,
  { authorityHost: env.AZURE_AUTHORITY_HOST, disableInstanceDiscovery: true });
const uri = env.KEYS_VAULT_URI;
const options = { disableChallengeResourceVerification: true };
const keys = new KeyClient(uri, cred, options);
const certs = new CertificateClient(uri, cred, options);
const secrets = new SecretClient(uri, cred, options);
const out = {};

const status = async (fn) => {
  try {
    await fn();
    return 200;
  } catch (err) {
    return err.statusCode ?? String(err);
  }
};

const key = await keys.createRsaKey("js-rsa", { keySize: 2048 });
out.keyId = key.id;
out.keyHasPrivate = key.key.d !== undefined;
const crypto = new CryptographyClient(key, cred, options);
const digest = createHash("sha256").update("payload").digest();
const sig = await crypto.sign("RS256", digest);
out.verified = (await crypto.verify("RS256", digest, sig.result)).result;
out.tamperedVerified = (await crypto.verify("RS256", Buffer.alloc(32), sig.result)).result;
const plain = Buffer.from("a data encryption key");
const enc = await crypto.encrypt({ algorithm: "RSA-OAEP-256", plaintext: plain });
out.decrypted = Buffer.from((await crypto.decrypt({ algorithm: "RSA-OAEP-256", ciphertext: enc.result })).result).toString();
const wrapped = await crypto.wrapKey("RSA-OAEP", plain);
out.unwrapped = Buffer.from((await crypto.unwrapKey("RSA-OAEP", wrapped.result)).result).toString();
const ec = await keys.createEcKey("js-ec", { curve: "P-384" });
out.ecSigned = (await new CryptographyClient(ec, cred, options).signData("ES384", Buffer.from("x"))).result.length;

// Bad input, through a client that only knows the key's id (so every operation is remote).
const remote = new CryptographyClient(key.id, cred, options);
out.unknownAlgorithm = await status(() => remote.sign("RS999", digest));
out.wrongDigest = await status(() => remote.sign("RS256", digest.subarray(0, 20)));
await keys.createRsaKey("js-sign-only", { keyOps: ["sign", "verify"] });
out.opNotAllowed = await status(() => new CryptographyClient(`${uri}keys/js-sign-only`, cred, options).unwrapKey("RSA-OAEP", wrapped.result));
await keys.updateKeyProperties("js-rsa", key.properties.version, { enabled: false });
out.disabled = await status(() => remote.sign("RS256", digest));

// A self-signed certificate, its PEM secret, and a PFX import with a wrong password.
const poller = await certs.beginCreateCertificate("js-cert", {
  issuerName: WellKnownIssuer.Self, subject: "CN=js.example.com", contentType: "application/x-pem-file",
  subjectAlternativeNames: { dnsNames: ["js.example.com"] },
}, { updateIntervalInMs: 100 });
const cert = await poller.pollUntilDone();
out.certId = cert.properties.id;
out.certLength = cert.cer.length;
const secret = await secrets.getSecret("js-cert");
out.secretContentType = secret.properties.contentType;
out.secretHasKey = secret.value.includes("PRIVATE KEY-----");
out.wrongPassword = await status(() => certs.importCertificate("js-bad", Buffer.from("not a pfx"), { password: "x" }));

console.log(JSON.stringify(out));
