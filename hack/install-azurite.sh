#!/usr/bin/env bash
# Installs Azurite, the Azure Storage emulator behind the local cloud's blob, queue and table
# endpoints, at the version pinned in hack/azurite/package-lock.json, into DIR (default:
# $CERULEAN_BIN_DIR/azurite, else bin/azurite), and Debian's Node.js it runs on
# (hack/install-debian-node.sh). Nothing is fetched when DIR already holds that lock file's
# packages. Usage: hack/install-azurite.sh [DIR]
set -euo pipefail

root_dir="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${CERULEAN_BIN_DIR:-$root_dir/bin}"
dir="${1:-$bin_dir/azurite}"
src="$root_dir/hack/azurite"

"$root_dir/hack/install-debian-node.sh" "$bin_dir/debian-node"
if cmp -s "$src/package-lock.json" "$dir/package-lock.json" && [ -f "$dir/node_modules/azurite/dist/src/azurite.js" ]; then
	exit 0
fi
"$root_dir/hack/install-test-deps.sh" npm

echo "installing Azurite $(sed -n 's/.*"azurite": "\(.*\)".*/\1/p' "$src/package.json" | head -1) into $dir (first run only, about 2 minutes)…" >&2
mkdir -p "$(dirname "$dir")"
work="$(mktemp -d "$(dirname "$dir")/.azurite.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$src/package.json" "$src/package-lock.json" "$work/"
(cd "$work" && npm ci --omit=dev --no-audit --no-fund --loglevel=error >&2)
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
