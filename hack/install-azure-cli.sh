#!/usr/bin/env bash
# Installs the Azure CLI from Debian's packages for the tests that run it (internal/cloud's
# TestAzureCLI, the CLI block of docs/cloud.md). Does nothing when `az` is already on PATH.
set -euo pipefail

if command -v az >/dev/null 2>&1; then
	exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	sudo=(sudo)
fi

echo "installing the Azure CLI from Debian's packages (first run only, about 3 minutes)…" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq azure-cli >/dev/null
command -v az >/dev/null || { echo "azure-cli is installed but az is not on PATH" >&2; exit 1; }
