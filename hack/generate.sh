#!/usr/bin/env bash
# Regenerates what controller-gen derives from api/ and the kubebuilder markers.
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G "api/*/*/*.go" >/dev/null; then
	bin/controller-gen object paths=./api/...
	bin/controller-gen crd rbac:roleName=cerulean-manager webhook paths=./... output:crd:dir=config/crd output:rbac:dir=config/rbac output:webhook:dir=config/webhook
fi
go generate ./...
