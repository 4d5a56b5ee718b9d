// Loaded by `node --require` before Azurite (internal/cloud/storage/azurite.go). Azurite knows
// the accounts listed in AZURITE_ACCOUNTS when it starts; the local cloud's storage accounts come
// and go with ARM. So every valid account name is an Azurite account whose key is the cloud's
// own (CERULEAN_AZURITE_KEY): the cloud's front authorizes each request for the account it names
// with that account's ARM keys, SAS or token, and only then forwards it signed with this key.
"use strict";
const path = require("path");
const key = Buffer.from(process.env.CERULEAN_AZURITE_KEY || "", "base64");
delete process.env.CERULEAN_AZURITE_KEY;
if (key.length < 32) {
	throw new Error("CERULEAN_AZURITE_KEY is not set");
}
const store = require(path.join(process.env.CERULEAN_AZURITE_DIR, "node_modules/azurite/dist/src/common/AccountDataStore.js")).default;
store.prototype.getAccount = function (name) {
	return /^[a-z0-9]{3,24}$/.test(name) ? { name, key1: key } : undefined;
};
