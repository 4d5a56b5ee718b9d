package up

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/kmsplugin"
	"github.com/cerulean/cerulean/internal/rollout/fleet"
)

// With --kms, kube-apiserver encrypts Secrets with a key of the local cloud's Key Vault through
// cerulean's KMS plugin, as a hosted control plane's kms component does.
const (
	KMSVault = "cerulean-kms" // in the cluster's resource group
	KMSKey   = "etcd"
	// KMSConfigFileName is kube-apiserver's EncryptionConfiguration in the data directory.
	KMSConfigFileName = "encryption.yaml"
)

// cryptoOfficer and cryptoEncryptionUser are the built-in roles: the first lets up create the
// key, the second is all the plugin needs (get, wrapKey, unwrapKey).
const (
	cryptoOfficer        = "14b46e9e-c2b7-41b4-b07b-48a6ebf60603"
	cryptoEncryptionUser = "e147488a-f6f5-4113-8e2d-b22465e65bf6"
)

// startKMS makes (or finds) the vault and its RSA key, runs the plugin on DIR/kms.sock as the
// cloud's bootstrap principal until ctx ends, and writes the EncryptionConfiguration that names
// it. It returns the configuration's path and the plugin's exit.
func startKMS(ctx context.Context, az *cloud.Cloud, dataDir string) (string, <-chan error, error) {
	cfg := fleet.AzureConfig(az)
	cred, err := cfg.Credential()
	if err != nil {
		return "", nil, fmt.Errorf("KMS: %w", err)
	}
	uri, err := ensureKMSKey(ctx, az, cred)
	if err != nil {
		return "", nil, fmt.Errorf("KMS: %w", err)
	}
	so, err := cfg.SecretsOptions()
	if err != nil {
		return "", nil, err
	}
	p, err := kmsplugin.New(kmsplugin.Options{VaultURL: uri, KeyName: KMSKey, Credential: cred,
		Client: &azkeys.ClientOptions{ClientOptions: so.ClientOptions, DisableChallengeResourceVerification: so.DisableChallengeResourceVerification}})
	if err != nil {
		return "", nil, fmt.Errorf("KMS: %w", err)
	}
	socket := filepath.Join(dataDir, "kms.sock")
	done := make(chan error, 1)
	go func() { done <- kmsplugin.Serve(ctx, p, socket) }()
	config := filepath.Join(dataDir, KMSConfigFileName)
	if err := os.WriteFile(config, kmsplugin.EncryptionConfig(socket), 0o600); err != nil {
		return "", nil, fmt.Errorf("KMS: write %s: %w", config, err)
	}
	return config, done, nil
}

// ensureKMSKey creates the RBAC vault, gives the bootstrap principal Crypto Officer (to create
// the key) and Crypto Service Encryption User (the plugin runs as it) on it, and creates the key
// when it is missing. Running it again changes nothing.
func ensureKMSKey(ctx context.Context, az *cloud.Cloud, cred azcore.TokenCredential) (string, error) {
	cfg := fleet.AzureConfig(az)
	opts, err := cfg.ARMOptions()
	if err != nil {
		return "", err
	}
	sub := cfg.SubscriptionID
	groups, err := armresources.NewResourceGroupsClient(sub, cred, opts)
	if err != nil {
		return "", err
	}
	if _, err := groups.CreateOrUpdate(ctx, clusterGroup, armresources.ResourceGroup{Location: to.Ptr(clusterLocation)}, nil); err != nil {
		return "", fmt.Errorf("create resource group %s: %w", clusterGroup, err)
	}
	vaults, err := armkeyvault.NewVaultsClient(sub, cred, opts)
	if err != nil {
		return "", err
	}
	poller, err := vaults.BeginCreateOrUpdate(ctx, clusterGroup, KMSVault, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr(clusterLocation),
		Properties: &armkeyvault.VaultProperties{TenantID: to.Ptr(cfg.TenantID), EnableRbacAuthorization: to.Ptr(true),
			SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)}},
	}, nil)
	if err != nil {
		return "", fmt.Errorf("create vault %s: %w", KMSVault, err)
	}
	kv, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("create vault %s: %w", KMSVault, err)
	}
	roles, err := armauthorization.NewRoleAssignmentsClient(sub, cred, opts)
	if err != nil {
		return "", err
	}
	owner := az.Settings().ObjectID
	for _, role := range []string{cryptoOfficer, cryptoEncryptionUser} {
		name := uuid.NewSHA1(uuid.NameSpaceURL, []byte(*kv.ID+"|"+role+"|"+owner)).String()
		if _, err := roles.Create(ctx, *kv.ID, name, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + sub + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
			PrincipalID:      to.Ptr(owner), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		}}, nil); err != nil {
			return "", fmt.Errorf("assign a crypto role on vault %s: %w", KMSVault, err)
		}
	}
	so, err := cfg.SecretsOptions()
	if err != nil {
		return "", err
	}
	keys, err := azkeys.NewClient(*kv.Properties.VaultURI, cred, &azkeys.ClientOptions{ClientOptions: so.ClientOptions, DisableChallengeResourceVerification: so.DisableChallengeResourceVerification})
	if err != nil {
		return "", err
	}
	_, err = keys.GetKey(ctx, KMSKey, "", nil)
	var re *azcore.ResponseError
	switch {
	case err == nil:
	case errors.As(err, &re) && re.StatusCode == http.StatusNotFound:
		if _, err := keys.CreateKey(ctx, KMSKey, azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA), KeySize: to.Ptr[int32](3072)}, nil); err != nil {
			return "", fmt.Errorf("create key %s in vault %s: %w", KMSKey, KMSVault, err)
		}
	default:
		return "", fmt.Errorf("read key %s of vault %s: %w", KMSKey, KMSVault, err)
	}
	return *kv.Properties.VaultURI, nil
}
