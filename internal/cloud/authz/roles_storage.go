package authz

// The storage data roles, with Azure's action sets. Kept in their own file (and appended to
// builtIns before init normalizes them) so providers add roles without touching the others.

// Storage data role ids, as in every Azure tenant.
//
//nolint:gosec // role ids, not credentials
const (
	StorageBlobDataOwner         = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
	StorageBlobDataContributor   = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
	StorageBlobDataReader        = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
	StorageQueueDataContributor  = "974c5e8b-45b9-4653-ba55-5f855dd0fb88"
	StorageQueueDataReader       = "19e7f393-937e-4f77-808e-94535e297925"
	StorageQueueMessageProcessor = "8a0f0c08-91a1-4084-bc3d-661d67233fed"
	StorageQueueMessageSender    = "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a"
	StorageTableDataContributor  = "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3"
	StorageTableDataReader       = "76199698-9eea-4c19-bc75-cec21354c6b6"
)

const (
	blobContainers = "Microsoft.Storage/storageAccounts/blobServices/containers/"
	queues         = "Microsoft.Storage/storageAccounts/queueServices/queues/"
	tables         = "Microsoft.Storage/storageAccounts/tableServices/tables/"
)

var storageRoles = []RoleDefinition{
	{
		ID: StorageBlobDataOwner, RoleName: "Storage Blob Data Owner",
		Description: "Allows for full access to Azure Storage blob containers and data, including assigning POSIX access control.",
		Permissions: []Permission{{
			Actions:     []string{blobContainers + "*", "Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action"},
			DataActions: []string{blobContainers + "blobs/*"},
		}},
	},
	{
		ID: StorageBlobDataContributor, RoleName: "Storage Blob Data Contributor",
		Description: "Allows for read, write and delete access to Azure Storage blob containers and data",
		Permissions: []Permission{{
			Actions: []string{blobContainers + "delete", blobContainers + "read", blobContainers + "write", "Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action"},
			DataActions: []string{
				blobContainers + "blobs/delete", blobContainers + "blobs/read", blobContainers + "blobs/write",
				blobContainers + "blobs/move/action", blobContainers + "blobs/add/action",
			},
		}},
	},
	{
		ID: StorageBlobDataReader, RoleName: "Storage Blob Data Reader",
		Description: "Allows for read access to Azure Storage blob containers and data",
		Permissions: []Permission{{
			Actions:     []string{blobContainers + "read", "Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action"},
			DataActions: []string{blobContainers + "blobs/read"},
		}},
	},
	{
		ID: StorageQueueDataContributor, RoleName: "Storage Queue Data Contributor",
		Description: "Allows for read, write, and delete access to Azure Storage queues and queue messages",
		Permissions: []Permission{{
			Actions: []string{queues + "delete", queues + "read", queues + "write"},
			DataActions: []string{
				queues + "messages/delete", queues + "messages/read", queues + "messages/write",
				queues + "messages/process/action", queues + "messages/add/action",
			},
		}},
	},
	{
		ID: StorageQueueDataReader, RoleName: "Storage Queue Data Reader",
		Description: "Allows for read access to Azure Storage queues and queue messages",
		Permissions: []Permission{{Actions: []string{queues + "read"}, DataActions: []string{queues + "messages/read"}}},
	},
	{
		ID: StorageQueueMessageProcessor, RoleName: "Storage Queue Data Message Processor",
		Description: "Allows for peek, receive, and delete access to Azure Storage queue messages",
		Permissions: []Permission{{DataActions: []string{queues + "messages/read", queues + "messages/process/action"}}},
	},
	{
		ID: StorageQueueMessageSender, RoleName: "Storage Queue Data Message Sender",
		Description: "Allows for sending of Azure Storage queue messages",
		Permissions: []Permission{{DataActions: []string{queues + "messages/add/action"}}},
	},
	{
		ID: StorageTableDataContributor, RoleName: "Storage Table Data Contributor",
		Description: "Allows for read, write and delete access to Azure Storage tables and entities",
		Permissions: []Permission{{
			Actions: []string{tables + "read", tables + "write", tables + "delete"},
			DataActions: []string{
				tables + "entities/read", tables + "entities/write", tables + "entities/delete",
				tables + "entities/add/action", tables + "entities/update/action",
			},
		}},
	},
	{
		ID: StorageTableDataReader, RoleName: "Storage Table Data Reader",
		Description: "Allows for read access to Azure Storage tables and entities",
		Permissions: []Permission{{Actions: []string{tables + "read"}, DataActions: []string{tables + "entities/read"}}},
	},
}

// Package-level variables are initialized before init functions run: the storage roles are
// in builtIns when roles.go's init normalizes them.
var _ = func() bool { builtIns = append(builtIns, storageRoles...); return true }()
