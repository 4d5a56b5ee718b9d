#!/usr/bin/env bash
# Fails when `make generate` would change any file: generated files must be committed current.
set -euo pipefail
cd "$(dirname "$0")/.."
fingerprint() { { find api config charts/cerulean/crds charts/cerulean/files -type f 2>/dev/null || true; } | LC_ALL=C sort | xargs -r sha256sum; }
before=$(fingerprint)
hack/generate.sh
after=$(fingerprint)
if [ "$before" != "$after" ]; then
	diff <(echo "$before") <(echo "$after") >&2 || true
	echo "generated files were stale; run 'make generate' and commit the result" >&2
	exit 1
fi
echo "generated files are current"
