#!/usr/bin/env bash
# Installs the Azure CLI from Debian's packages for the tests that run it (internal/cloud's
# TestAzureCLI, the CLI block of docs/cloud.md). Does nothing when `az` is already on PATH.
# Kept for its name; hack/install-test-deps.sh installs every program the tests need.
set -euo pipefail
exec "$(dirname "$0")/install-test-deps.sh" az
