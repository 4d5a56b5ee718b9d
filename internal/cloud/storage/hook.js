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

// When the cloud dies, the kernel sends Azurite its death signal (SIGTERM) once per reparenting:
// from the thread that started it to another of the cloud's threads, then to init. Azurite's
// handler runs once, so a second SIGTERM would end the process mid-save and lose every write
// since the last autosave. Repeats are ignored here; a SIGTERM that arrives before Azurite
// installs its handler ends the process at once (nothing to save yet).
let azuriteSaving = false;
process.on("SIGTERM", () => {
	if (process.listenerCount("SIGTERM") > 1) {
		azuriteSaving = true;
		// Should Azurite's shutdown hang, still exit; unref'd so a finished save is not delayed.
		setTimeout(() => process.exit(1), 30000).unref();
		return;
	}
	if (!azuriteSaving) {
		process.exit(143);
	}
});
