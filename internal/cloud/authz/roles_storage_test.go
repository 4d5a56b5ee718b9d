package authz_test

import (
	"testing"

	"github.com/cerulean/cerulean/internal/cloud/authz"
)

// TestStorageDataRoles: the storage data roles grant what Azure's do, and Owner grants no data.
func TestStorageDataRoles(t *testing.T) {
	const blobs = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/"
	const msgs = "Microsoft.Storage/storageAccounts/queueServices/queues/messages/"
	const ents = "Microsoft.Storage/storageAccounts/tableServices/tables/entities/"
	for _, tc := range []struct {
		role, action string
		data, want   bool
	}{
		{authz.StorageBlobDataReader, blobs + "read", true, true},
		{authz.StorageBlobDataReader, blobs + "write", true, false},
		{authz.StorageBlobDataContributor, blobs + "write", true, true},
		{authz.StorageBlobDataContributor, "Microsoft.Storage/storageAccounts/blobServices/containers/write", false, true},
		{authz.StorageBlobDataOwner, blobs + "delete", true, true},
		{authz.StorageQueueDataReader, msgs + "read", true, true},
		{authz.StorageQueueDataReader, msgs + "add/action", true, false},
		{authz.StorageQueueMessageSender, msgs + "add/action", true, true},
		{authz.StorageQueueMessageProcessor, msgs + "process/action", true, true},
		{authz.StorageQueueDataContributor, msgs + "delete", true, true},
		{authz.StorageTableDataReader, ents + "read", true, true},
		{authz.StorageTableDataReader, ents + "write", true, false},
		{authz.StorageTableDataContributor, ents + "update/action", true, true},
		{authz.Owner, blobs + "read", true, false},
	} {
		r, ok := authz.RoleByID(tc.role)
		if !ok {
			t.Fatalf("role %s is not built in", tc.role)
		}
		got := r.Allows(tc.action)
		if tc.data {
			got = r.AllowsData(tc.action)
		}
		if got != tc.want {
			t.Errorf("%s allows %s: %v, want %v", r.RoleName, tc.action, got, tc.want)
		}
	}
	if r, ok := authz.RoleByName("Storage Blob Data Contributor"); !ok || r.ID != authz.StorageBlobDataContributor || r.RoleType != "BuiltInRole" {
		t.Errorf("by name: %+v %v", r, ok)
	}
}
