#!/usr/bin/env bash
# Installs, from Debian's packages, the programs the tests run besides Go, where they are missing:
#   az    (azure-cli) internal/cloud's TestAzureCLI, the CLI block of docs/cloud.md
#   curl  (curl)      internal/cloud's TestHTTP2AnswersArriveWhole (needs HTTP/2 support)
#   node, npm         internal/cloud's TestJavaScriptSDK (the machine image may already bring Node.js 20)
#   jq    (jq)        cmd/cerulean-local's TestDocsCloud (docs/cloud.md's blocks use it)
#   ip, iptables      internal/podidentity/nodeagent's network-path tests (as root; they fail under CI=true otherwise)
#   chromium          internal/cloud/webview's browser test (headless, driven by chromedp)
# With arguments, only those programs (e.g. `hack/install-test-deps.sh az`). Idempotent: nothing
# is fetched when everything is there. To add a program, add a line to the table below.
set -euo pipefail

# program  package    check that the program found is usable
table=(
	"az        azure-cli  true"
	"curl      curl       curl_has_http2"
	"node      nodejs     true"
	"npm       npm        true"
	"jq        jq         true"
	"ip        iproute2   true"
	"iptables  iptables   true"
	"chromium  chromium   true"
)

curl_has_http2() { curl --version | grep -qw HTTP2; }

wanted=("$@")
missing=()
for row in "${table[@]}"; do
	read -r prog pkg check <<<"$row"
	if [ ${#wanted[@]} -gt 0 ] && [[ " ${wanted[*]} " != *" $prog "* ]]; then
		continue
	fi
	if command -v "$prog" >/dev/null 2>&1 && "$check"; then
		continue
	fi
	missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	sudo=(sudo)
fi

echo "installing ${missing[*]} from Debian's packages (first run only; the Azure CLI takes about 3 minutes)…" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
for row in "${table[@]}"; do
	read -r prog pkg check <<<"$row"
	if [[ " ${missing[*]} " == *" $pkg "* ]] && ! { command -v "$prog" >/dev/null 2>&1 && "$check"; }; then
		echo "$pkg is installed but $prog is not usable (not on PATH, or lacking a feature the tests need)" >&2
		exit 1
	fi
done
