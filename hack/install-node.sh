#!/usr/bin/env bash
# Installs Node.js and npm from Debian's packages for the JavaScript SDK tests
# (internal/cloud's TestJavaScriptSDK) where the machine has none. Does nothing when both
# `node` and `npm` are on PATH (the machine image brings Node.js 20 and npm).
set -euo pipefail

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
	exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	sudo=(sudo)
fi

echo "installing Node.js and npm from Debian's packages (first run only)…" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
command -v node >/dev/null && command -v npm >/dev/null || { echo "nodejs and npm are installed but not on PATH" >&2; exit 1; }
