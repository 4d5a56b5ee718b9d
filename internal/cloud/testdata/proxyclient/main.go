// Command proxyclient is an Azure SDK for Go program with no options at all: public-cloud
// defaults, DefaultAzureCredential(nil), azsecrets with challenge verification on. Only its
// environment (HTTPS_PROXY, SSL_CERT_FILE, AZURE_*) points it at the local cloud's proxy. It
// creates a resource group, a managed identity and a vault, writes and reads a secret, and
// prints what it saw as JSON.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sub, tenant := os.Getenv("AZURE_SUBSCRIPTION_ID"), os.Getenv("AZURE_TENANT_ID")
	group, vaultName, objectID := os.Args[1], os.Args[2], os.Args[3]
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return err
	}
	groups, err := armresources.NewResourceGroupsClient(sub, cred, nil)
	if err != nil {
		return err
	}
	g, err := groups.CreateOrUpdate(ctx, group, armresources.ResourceGroup{Location: to.Ptr("westeurope")}, nil)
	if err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(sub, cred, nil)
	if err != nil {
		return err
	}
	id, err := ids.CreateOrUpdate(ctx, group, "app", armmsi.Identity{Location: to.Ptr("westeurope")}, nil)
	if err != nil {
		return fmt.Errorf("create identity: %w", err)
	}
	vaults, err := armkeyvault.NewVaultsClient(sub, cred, nil)
	if err != nil {
		return err
	}
	poller, err := vaults.BeginCreateOrUpdate(ctx, group, vaultName, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("westeurope"),
		Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(tenant),
			SKU:      &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			AccessPolicies: []*armkeyvault.AccessPolicyEntry{{
				TenantID: to.Ptr(tenant), ObjectID: to.Ptr(objectID),
				Permissions: &armkeyvault.Permissions{Secrets: []*armkeyvault.SecretPermissions{to.Ptr(armkeyvault.SecretPermissionsAll)}},
			}},
		},
	}, nil)
	if err != nil {
		return fmt.Errorf("create vault: %w", err)
	}
	v, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		return fmt.Errorf("create vault: %w", err)
	}
	secrets, err := azsecrets.NewClient(*v.Properties.VaultURI, cred, nil)
	if err != nil {
		return err
	}
	set, err := secrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr("s3cret-value")}, nil)
	if err != nil {
		return fmt.Errorf("set secret: %w", err)
	}
	got, err := secrets.GetSecret(ctx, "db-password", "", nil)
	if err != nil {
		return fmt.Errorf("get secret: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]string{
		"groupId": *g.ID, "identityClientId": *id.Properties.ClientID, "vaultUri": *v.Properties.VaultURI,
		"secretId": string(*set.ID), "secretValue": *got.Value,
	})
}
