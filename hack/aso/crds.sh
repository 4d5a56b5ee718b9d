#!/usr/bin/env bash
# Generates Azure Service Operator v2's CRDs and admission webhook configurations, which its Go
# module does not carry, with bin/controller-gen from a writable copy of the module pinned in
# hack/tools/aso, for the API groups the manager benchmark uses. Cached by version under
# bin/.cache/aso-crds/<version>/: crd/*.yaml and webhook/manifests.yaml, as controller-gen wrote
# them (service-based webhooks, no labels: the benchmark adds those for the address it runs on).
# Usage: hack/aso/crds.sh   (prints the output directory)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/bin"
groups=(resources managedidentity keyvault authorization dbforpostgresql cache storage)

mod=github.com/Azure/azure-service-operator/v2
ver=$(cd "$root/hack/tools/aso" && go list -m -f '{{.Version}}' "$mod")
src=$(cd "$root/hack/tools/aso" && go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "crds.sh: module $mod@$ver not found (go mod download failed)" >&2; exit 1; }
cg_ver=$("$bin/controller-gen" --version | awk '{print $NF}')

out="$bin/.cache/aso-crds/$ver"
key="$ver $cg_ver ${groups[*]}"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$key" ]; then
	echo "$out"
	exit 0
fi

echo "generating Azure Service Operator $ver CRDs for ${groups[*]} (first run only, about a minute)…" >&2
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
# controller-gen loads the packages with the go command, which wants a writable module root;
# the module cache is read-only. Only what the api packages import is copied.
mkdir -p "$work/src"
cp -r "$src/go.mod" "$src/go.sum" "$src/internal" "$src/pkg" "$work/src/"
mkdir -p "$work/src/api"
paths=()
for g in "${groups[@]}"; do
	cp -r "$src/api/$g" "$work/src/api/"
	paths+=("paths=./api/$g/...")
done
chmod -R u+w "$work/src"
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
(cd "$work/src" && GOFLAGS=-mod=mod "$bin/controller-gen" crd:allowDangerousTypes=true,crdVersions=v1 webhook \
	"${paths[@]}" output:crd:dir="$out.tmp/crd" output:webhook:dir="$out.tmp/webhook")
echo "$key" >"$out.tmp/stamp"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
