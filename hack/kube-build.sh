#!/usr/bin/env bash
# Prints the path of a program of the local cloud's Kubernetes tier, building
# it from the Go module proxy only when the cache lacks it:
#
#   kubelet="$(hack/kube-build.sh kubelet)"
#
# Programs and the module (under tools/) that pins each:
#   kube-apiserver                                        tools/kube-apiserver
#   kubelet kube-proxy kube-controller-manager
#   kube-scheduler kubectl                                tools/kubernetes
#   containerd containerd-shim-runc-v2 ctr crictl         tools/containerd
#
# `hack/kube-build.sh all` builds every one but crictl and prints one path
# a line. The cache is keyed by the program's module version
# and the Go version, in $VPCNET_CACHE_DIR, else /var/cache/vpcnet when
# writable (root, CI), else ${XDG_CACHE_HOME:-~/.cache}/vpcnet; the layout is
# the one hack/kube-apiserver.sh uses, so both scripts share a cache. Build
# output goes to stderr; stdout carries only the path. Measured on a shared
# 2-core machine under load 12 to 17, modules already downloaded: containerd
# 308 s, then its shim 18 s and ctr 102 s; kubelet 936 s, then (sharing most
# packages) kube-scheduler 98 s, kubectl 151 s, kube-proxy and
# kube-controller-manager a few minutes each. A cached program: instant.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
go="${GO:-go}"

# `all` is what `make kube-bins` links; crictl is built only by name (for
# poking at a node's CRI by hand: crictl --runtime-endpoint
# unix://STATE/kube/NODE/root/run_containerd/containerd.sock).
all=(kube-apiserver kubelet kube-proxy kube-controller-manager kube-scheduler kubectl containerd containerd-shim-runc-v2 ctr)

if [ $# -ne 1 ]; then
	echo "usage: kube-build.sh PROGRAM|all (programs: ${all[*]} crictl)" >&2
	exit 2
fi
if [ "$1" = all ]; then
	for p in "${all[@]}"; do
		"$0" "$p"
	done
	exit 0
fi

name="$1"
tags=""
case "$name" in
kube-apiserver)
	exec "$root/hack/kube-apiserver.sh"
	;;
kubelet | kube-proxy | kube-controller-manager | kube-scheduler | kubectl)
	module="$root/tools/kubernetes"
	modpath=k8s.io/kubernetes
	pkg="k8s.io/kubernetes/cmd/$name"
	;;
containerd | containerd-shim-runc-v2 | ctr)
	module="$root/tools/containerd"
	modpath=github.com/containerd/containerd/v2
	pkg="github.com/containerd/containerd/v2/cmd/$name"
	tags="no_btrfs no_devmapper no_zfs"
	;;
crictl)
	module="$root/tools/containerd"
	modpath=sigs.k8s.io/cri-tools
	pkg=sigs.k8s.io/cri-tools/cmd/crictl
	;;
*)
	echo "kube-build.sh: unknown program $name (programs: ${all[*]} crictl)" >&2
	exit 2
	;;
esac

version="$(cd "$module" && "$go" list -m -f '{{.Version}}' "$modpath")"
if [ -z "$version" ]; then
	echo "kube-build.sh: $module/go.mod does not require $modpath" >&2
	exit 1
fi
goversion="$(cd "$module" && "$go" env GOVERSION)"

cache="${VPCNET_CACHE_DIR:-}"
if [ -z "$cache" ]; then
	if mkdir -p /var/cache/vpcnet 2>/dev/null && [ -w /var/cache/vpcnet ]; then
		cache=/var/cache/vpcnet
	else
		cache="${XDG_CACHE_HOME:-$HOME/.cache}/vpcnet"
	fi
fi
dir="$cache/$name-$version/$goversion"
bin="$dir/$name"

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$dir"
# One build at a time per cache entry: a second caller waits, then finds
# the binary the first one built.
exec 9>"$dir/.lock"
if command -v flock >/dev/null; then
	flock 9
fi
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

ldflags="-s -w"
case "$modpath" in
k8s.io/kubernetes)
	minor="${version#v1.}"
	minor="${minor%%.*}"
	ldflags+=" -X k8s.io/component-base/version.gitVersion=$version"
	ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
	ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
	ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
	;;
github.com/containerd/containerd/v2)
	ldflags+=" -X github.com/containerd/containerd/v2/version.Version=$version"
	ldflags+=" -X github.com/containerd/containerd/v2/version.Revision=module-proxy"
	;;
sigs.k8s.io/cri-tools)
	ldflags+=" -X sigs.k8s.io/cri-tools/pkg/version.Version=$version"
	;;
esac

echo "kube-build.sh: building $name $version with $goversion into $dir" >&2
start=$SECONDS
tmp="$(mktemp "$dir/.$name.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
(
	cd "$module"
	CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly" "$go" build -trimpath -tags "$tags" -ldflags "$ldflags" \
		-o "$tmp" "$pkg"
)
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
echo "kube-build.sh: built $name in $((SECONDS - start))s" >&2
echo "$bin"
