package keyvault

// collection is the path segment, RBAC scope segment and access-policy list of a kind.
func (k kind) collection() string {
	switch k {
	case kindKey:
		return "keys"
	case kindCert:
		return "certificates"
	}
	return "secrets"
}

const (
	keyActions  = "Microsoft.KeyVault/vaults/keys/"
	certActions = "Microsoft.KeyVault/vaults/certificates/"
)

// The data actions and access-policy permissions of key and certificate operations, as Azure
// names them (the Key Vault Crypto and Certificates roles grant these actions).
func init() {
	for o, p := range map[op]permission{
		opKeyCreate:      {keyActions + "create/action", "create"},
		opKeyImport:      {keyActions + "import/action", "import"},
		opKeyGet:         {keyActions + "read", "get"},
		opKeyUpdate:      {keyActions + "update/action", "update"},
		opKeyList:        {keyActions + "read", "list"},
		opKeyVersions:    {keyActions + "read", "list"},
		opKeyDelete:      {keyActions + "delete", "delete"},
		opKeyGetDeleted:  {keyActions + "read", "get"},
		opKeyListDeleted: {keyActions + "read", "list"},
		opKeyRecover:     {keyActions + "recover/action", "recover"},
		opKeyPurge:       {keyActions + "purge/action", "purge"},
		opKeyBackup:      {keyActions + "backup/action", "backup"},
		opKeyRestore:     {keyActions + "restore/action", "restore"},
		opKeyRotate:      {keyActions + "rotate/action", "rotate"},
		opKeyGetPolicy:   {"Microsoft.KeyVault/vaults/keyrotationpolicies/read", "getrotationpolicy"},
		opKeySetPolicy:   {"Microsoft.KeyVault/vaults/keyrotationpolicies/write", "setrotationpolicy"},
		opKeySign:        {keyActions + "sign/action", "sign"},
		opKeyVerify:      {keyActions + "verify/action", "verify"},
		opKeyEncrypt:     {keyActions + "encrypt/action", "encrypt"},
		opKeyDecrypt:     {keyActions + "decrypt/action", "decrypt"},
		opKeyWrap:        {keyActions + "wrap/action", "wrapKey"},
		opKeyUnwrap:      {keyActions + "unwrap/action", "unwrapKey"},

		opCertCreate:        {certActions + "create/action", "create"},
		opCertImport:        {certActions + "import/action", "import"},
		opCertGet:           {certActions + "read", "get"},
		opCertUpdate:        {certActions + "update/action", "update"},
		opCertList:          {certActions + "read", "list"},
		opCertVersions:      {certActions + "read", "list"},
		opCertDelete:        {certActions + "delete", "delete"},
		opCertGetDeleted:    {certActions + "read", "get"},
		opCertListDeleted:   {certActions + "read", "list"},
		opCertRecover:       {certActions + "recover/action", "recover"},
		opCertPurge:         {certActions + "purge/action", "purge"},
		opCertBackup:        {certActions + "backup/action", "backup"},
		opCertRestore:       {certActions + "restore/action", "restore"},
		opCertGetPolicy:     {certActions + "read", "get"},
		opCertUpdatePolicy:  {certActions + "update/action", "update"},
		opCertGetPending:    {certActions + "read", "get"},
		opCertUpdatePending: {certActions + "update/action", "update"},
		opCertDeletePending: {certActions + "delete", "delete"},
		opCertMerge:         {certActions + "create/action", "create"},
	} {
		permissions[o] = p
	}
}
