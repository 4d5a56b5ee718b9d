#!/usr/bin/env bash
# Builds one pinned tool group from hack/tools/<group> into bin/, only when its pins changed.
# Usage: hack/tools/build.sh <group>
set -euo pipefail
tags=""
manifests=()

group=${1:?usage: build.sh <group>}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/hack/tools/$group"
bin="$root/bin"
stamps="$bin/.stamps"
mkdir -p "$stamps"

# version_of MODULE prints the version go.mod pins for MODULE.
version_of() { (cd "$dir" && go list -m -f '{{.Version}}' "$1"); }

case "$group" in
kubernetes)
	ver=$(version_of k8s.io/kubernetes)
	minor=$(echo "$ver" | cut -d. -f2)
	commit=$(echo "$ver" | sha1sum | cut -c1-40) # the module proxy carries no commit; stamp the tag's digest
	ldflags=""
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=$commit"
		ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	tools=(kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler kube-proxy)
	pkgs=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
		k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy)
	note="first run only, about 12 minutes"
	;;
containerd)
	# The local node's runtime. Debian's containerd is 1.x, which Kubernetes 1.36 no longer
	# supports; v2 builds without cgo when the snapshotters that need it are left out.
	ver=$(version_of github.com/containerd/containerd/v2)
	ldflags="-X github.com/containerd/containerd/v2/version.Version=$ver -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
	tags="no_btrfs,no_devmapper,no_zfs"
	tools=(containerd containerd-shim-runc-v2 ctr)
	pkgs=(github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
		github.com/containerd/containerd/v2/cmd/ctr)
	note="first run only, about 3 minutes"
	;;
etcd)
	ver=$(version_of go.etcd.io/etcd/server/v3)
	ldflags="-X go.etcd.io/etcd/api/v3/version.GitSHA=$ver"
	tools=(etcd)
	pkgs=(go.etcd.io/etcd/server/v3)
	note="first run only, under a minute"
	;;
controller-gen)
	ver=$(version_of sigs.k8s.io/controller-tools)
	ldflags="-X sigs.k8s.io/controller-tools/pkg/version.version=$ver"
	tools=(controller-gen)
	pkgs=(sigs.k8s.io/controller-tools/cmd/controller-gen)
	note="first run only, under a minute"
	;;
helm)
	ver=$(version_of helm.sh/helm/v3)
	ldflags="-X helm.sh/helm/v3/internal/version.version=$ver"
	tools=(helm)
	pkgs=(helm.sh/helm/v3/cmd/helm)
	note="first run only, about 2 minutes"
	;;
golangci-lint)
	ver=$(version_of github.com/golangci/golangci-lint/v2)
	ldflags="-X main.version=${ver#v}"
	tools=(golangci-lint)
	pkgs=(github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
	note="first run only, about 3 minutes"
	;;
azure-workload-identity)
	# Only for `make bench`: the upstream webhook the benchmark compares with. The checksum
	# database does not know this module (go.sum still pins its hash), and monis.app/mlog, which
	# the proxy refuses, is replaced by the shim in ../mlog.
	export GONOSUMDB=github.com/Azure/azure-workload-identity
	ver=$(version_of github.com/Azure/azure-workload-identity)
	ldflags=""
	tools=(azure-wi-webhook)
	pkgs=(github.com/Azure/azure-workload-identity/cmd/webhook)
	note="first run only, about 2 minutes"
	;;
secrets-store-csi-driver)
	# The upstream Secrets Store CSI Driver, which the local node runs beside the kubelet.
	# monis.app/mlog, which the proxy refuses, is replaced by the shim in ../mlog. Its released
	# manifests (CRDs, CSIDriver, RBAC) are copied beside it, used as they are.
	ver=$(version_of sigs.k8s.io/secrets-store-csi-driver)
	ldflags="-X sigs.k8s.io/secrets-store-csi-driver/pkg/version.BuildVersion=$ver"
	tools=(secrets-store-csi-driver)
	pkgs=(sigs.k8s.io/secrets-store-csi-driver/cmd/secrets-store-csi-driver)
	manifests_from="sigs.k8s.io/secrets-store-csi-driver/deploy"
	manifests_to="secrets-store-csi-driver-manifests"
	manifests=(csidriver.yaml secrets-store.csi.x-k8s.io_secretproviderclasses.yaml
		secrets-store.csi.x-k8s.io_secretproviderclasspodstatuses.yaml rbac-secretproviderclass.yaml
		rbac-secretprovidertokenrequest.yaml rbac-secretproviderrotation.yaml)
	note="first run only, about 2 minutes"
	;;
coredns)
	# The local node's cluster DNS. The group's own main.go chooses CoreDNS's plugins (a custom
	# build as CoreDNS documents it), so it is part of the stamp.
	ver=$(version_of github.com/coredns/coredns)
	ldflags="-X github.com/coredns/coredns/coremain.GitCommit=$ver"
	tools=(coredns)
	pkgs=(github.com/cerulean/cerulean/hack/tools/coredns)
	own_sources=1
	note="first run only, about 2 minutes"
	;;
aso)
	# Azure Service Operator v2, the manager benchmark's baseline: built only by `make bench`.
	ver=$(version_of github.com/Azure/azure-service-operator/v2)
	ldflags="-X github.com/Azure/azure-service-operator/v2/internal/version.BuildVersion=$ver"
	tools=(azure-service-operator)
	pkgs=(github.com/Azure/azure-service-operator/v2/cmd/controller)
	note="first run only, about 8 minutes and 3.5 GB of memory"
	;;
*)
	echo "build.sh: unknown tool group $group" >&2
	exit 2
	;;
esac

# The stamp covers the pins, the flags, the packages, the copied manifests and the shim a group
# replaces a module with: any change rebuilds, nothing else does.
manifests_from=${manifests_from:-}
manifests_to=${manifests_to:-}
shims=$(cd "$dir" && go mod edit -json | sed -n 's/.*"Path": "\(\.\.*\/[^"]*\)".*/\1/p')
own=""
[ "${own_sources:-0}" = 1 ] && own="$dir"/*.go
want=$( (cat "$dir/go.mod" "$dir/go.sum"; for s in $shims; do cat "$dir/$s"/*.go; done; for f in $own; do cat "$f"; done
	echo "$ldflags ${tags:+$tags }${pkgs[*]}${manifests_to:+ $manifests_to ${manifests[*]}}") | sha256sum | cut -d' ' -f1)
stamp="$stamps/$group"
up_to_date=1
for t in "${tools[@]}"; do [ -x "$bin/$t" ] || up_to_date=0; done
for m in "${manifests[@]}"; do [ -f "$bin/$manifests_to/$m" ] || up_to_date=0; done
if [ "$up_to_date" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi

echo "building ${tools[*]} $ver ($note)…" >&2
start=$(date +%s)
for i in "${!tools[@]}"; do
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$bin/${tools[$i]}.tmp" "${pkgs[$i]}")
	mv "$bin/${tools[$i]}.tmp" "$bin/${tools[$i]}"
done
if [ "${#manifests[@]}" -gt 0 ]; then
	src="$(cd "$dir" && go list -m -f '{{.Dir}}' "$(dirname "$manifests_from")")/$(basename "$manifests_from")"
	mkdir -p "$bin/$manifests_to"
	for m in "${manifests[@]}"; do install -m 0644 "$src/$m" "$bin/$manifests_to/$m"; done
fi
echo "$want" >"$stamp"
echo "built ${tools[*]} $ver in $(($(date +%s) - start))s" >&2
