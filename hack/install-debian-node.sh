#!/usr/bin/env bash
# Unpacks Debian's Node.js (package nodejs of the machine's Debian release) into DIR, without
# installing it, for TestJavaScriptScenario (internal/cloud) to run the JavaScript SDKs on it
# as well as on the machine's own node. Usage: hack/install-debian-node.sh [DIR]
# (default: $CERULEAN_BIN_DIR/debian-node, else bin/debian-node).
#
# Debian builds node against its shared libnode and loads some builtins (acorn, undici,
# cjs-module-lexer) from /usr/share/nodejs, so DIR/node is a wrapper that runs the unpacked
# binary in a private mount namespace with DIR's /usr/share overlaid on the machine's.
# When the machine's node already is Debian's, DIR/node is a link to it; nothing is done when
# DIR/node already runs.
set -euo pipefail

root_dir="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-${CERULEAN_BIN_DIR:-$root_dir/bin}/debian-node}"

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	sudo=(sudo)
fi

debian_version() {
	apt-cache madison nodejs 2>/dev/null | awk -F'|' '$3 ~ /debian/ {gsub(/ /, "", $2); print $2; exit}'
}
version="$(debian_version)"
if [ -z "$version" ]; then
	"${sudo[@]}" apt-get update -qq
	version="$(debian_version)"
fi
[ -n "$version" ] || { echo "no nodejs package in Debian's package lists" >&2; exit 1; }

if [ -x "$dir/node" ] && "$dir/node" --version >/dev/null 2>&1; then
	exit 0
fi
if [ "$(dpkg-query -W -f='${Version}' nodejs 2>/dev/null || true)" = "$version" ]; then
	# The machine's node is Debian's: point at it.
	mkdir -p "$dir"
	ln -sfn "$(command -v node)" "$dir/node"
	exit 0
fi

echo "unpacking Debian's Node.js $version into $dir (first run only)…" >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work" # apt downloads as its own user

# The first alternative of each dependency, without versions or architecture qualifiers.
depends() {
	apt-cache show "$@" | awk '/^Depends:/ {sub(/^Depends: /, ""); print}' | tr ',' '\n' |
		sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/ //g' | sort -u
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

libnode="$(depends "nodejs=$version" | grep '^libnode' | head -1)"
[ -n "$libnode" ] || { echo "nodejs $version names no libnode package" >&2; exit 1; }
pkgs=("nodejs=$version" "$libnode=$version")
for dep in $(depends "nodejs=$version" "$libnode=$version"); do
	case "$dep" in nodejs | "$libnode") continue ;; esac
	if ! installed "$dep"; then
		pkgs+=("$dep")
		# Debian's node-* packages bring their own node-* dependencies.
		for sub in $(depends "$dep" | grep '^node-' || true); do
			installed "$sub" || pkgs+=("$sub")
		done
	fi
done
(cd "$work" && apt-get download -qq "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
ls "$work"/nodejs_*.deb >/dev/null

rm -rf "$dir"
mkdir -p "$dir/root"
for deb in "$work"/*.deb; do
	dpkg-deb -x "$deb" "$dir/root"
done
cat >"$dir/node" <<'EOF'
#!/bin/sh
# Debian's Node.js, unpacked by hack/install-debian-node.sh: run in a private mount namespace
# where this directory's /usr/share (node's externalized builtins) overlays the machine's.
root="$(cd "$(dirname "$0")" && pwd)/root"
if [ "$(id -u)" -eq 0 ]; then ns="--mount"; else ns="--user --map-root-user --mount"; fi
# shellcheck disable=SC2086 # two words or one
exec unshare $ns --propagation private sh -c '
	root="$1"; shift
	mount -t overlay overlay -o "lowerdir=$root/usr/share:/usr/share" /usr/share || exit 1
	LD_LIBRARY_PATH="$root/usr/lib/$(uname -m)-linux-gnu" exec "$root/usr/bin/node" "$@"
' sh "$root" "$@"
EOF
chmod +x "$dir/node"
"$dir/node" --version >/dev/null
