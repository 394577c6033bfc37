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
#   e2e.test agnhost ginkgo                               tools/e2e
#   coredns (cluster DNS's plugins: cmd/coredns)          tools/coredns
#   aws-k8s-agent aws-cni egress-cni aws-vpc-cni
#   aws-vpc-cni-init grpc-health-probe cni-loopback
#   cni-host-local cni-portmap cni-bandwidth               tools/aws-node
#
# `hack/kube-build.sh all` builds every one but crictl and the conformance
# programs (e2e.test, agnhost and the ginkgo runner that runs e2e.test in
# parallel processes; `hack/kube-build.sh conformance` builds those) and prints one path a line. e2e.test is `go test -c` of
# tools/e2e/conformance; its cache key also carries a hash of that
# package and its go.sum, so a change to the test main rebuilds it. The cache is keyed by the program's module version
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
all=(kube-apiserver kubelet kube-proxy kube-controller-manager kube-scheduler kubectl containerd containerd-shim-runc-v2 ctr coredns)
conformance=(e2e.test agnhost ginkgo)
# The Amazon VPC CNI's programs, as its two images carry them (the cni-*
# are the reference plugins its init image installs, named here apart
# from vpcnet's own portmap).
awsnode=(aws-k8s-agent aws-cni egress-cni aws-vpc-cni aws-vpc-cni-init grpc-health-probe cni-loopback cni-host-local cni-portmap cni-bandwidth)

if [ $# -ne 1 ]; then
	echo "usage: kube-build.sh PROGRAM|all|conformance|aws-node (programs: ${all[*]} ${conformance[*]} ${awsnode[*]} crictl)" >&2
	exit 2
fi
if [ "$1" = all ] || [ "$1" = conformance ] || [ "$1" = aws-node ]; then
	case "$1" in
	all) set -- "${all[@]}" ;;
	conformance) set -- "${conformance[@]}" ;;
	aws-node) set -- "${awsnode[@]}" ;;
	esac
	for p in "$@"; do
		"$0" "$p"
	done
	exit 0
fi

name="$1"
tags=""
# test: the program is a package's test binary (go test -c).
test=""
# ours: the package holding the program's main is this repository's, so
# its source is part of the cache key.
ours=""
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
e2e.test)
	module="$root/tools/e2e"
	modpath=k8s.io/kubernetes
	pkg=./conformance
	ours=conformance
	test=1
	;;
agnhost)
	module="$root/tools/e2e"
	modpath=k8s.io/kubernetes
	pkg=k8s.io/kubernetes/test/images/agnhost
	;;
ginkgo)
	module="$root/tools/e2e"
	modpath=github.com/onsi/ginkgo/v2
	pkg=github.com/onsi/ginkgo/v2/ginkgo
	;;
coredns)
	# The release's plugins for cluster DNS, not its every plugin
	# (tools/coredns/cmd/coredns says which and why).
	module="$root/tools/coredns"
	modpath=github.com/coredns/coredns
	pkg=./cmd/coredns
	ours=cmd/coredns
	;;
aws-k8s-agent | aws-vpc-cni | aws-vpc-cni-init | grpc-health-probe)
	module="$root/tools/aws-node"
	modpath=github.com/aws/amazon-vpc-cni-k8s
	pkg="github.com/aws/amazon-vpc-cni-k8s/cmd/$name"
	;;
aws-cni)
	module="$root/tools/aws-node"
	modpath=github.com/aws/amazon-vpc-cni-k8s
	pkg=github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin
	;;
egress-cni)
	module="$root/tools/aws-node"
	modpath=github.com/aws/amazon-vpc-cni-k8s
	pkg=github.com/aws/amazon-vpc-cni-k8s/cmd/egress-cni-plugin
	;;
cni-loopback)
	module="$root/tools/aws-node"
	modpath=github.com/containernetworking/plugins
	pkg=github.com/containernetworking/plugins/plugins/main/loopback
	;;
cni-host-local)
	module="$root/tools/aws-node"
	modpath=github.com/containernetworking/plugins
	pkg=github.com/containernetworking/plugins/plugins/ipam/host-local
	;;
cni-portmap | cni-bandwidth)
	module="$root/tools/aws-node"
	modpath=github.com/containernetworking/plugins
	pkg="github.com/containernetworking/plugins/plugins/meta/${name#cni-}"
	;;
*)
	echo "kube-build.sh: unknown program $name (programs: ${all[*]} ${conformance[*]} ${awsnode[*]} crictl)" >&2
	exit 2
	;;
esac

version="$(cd "$module" && "$go" list -m -f '{{.Version}}' "$modpath")"
if [ -z "$version" ]; then
	echo "kube-build.sh: $module/go.mod does not require $modpath" >&2
	exit 1
fi
goversion="$(cd "$module" && "$go" env GOVERSION)"
key="$version"
if [ -n "$ours" ]; then
	key="$version-$(cd "$module" && cat go.mod go.sum "$ours"/*.go | sha256sum | cut -c1-12)"
fi

cache="${VPCNET_CACHE_DIR:-}"
if [ -z "$cache" ]; then
	if mkdir -p /var/cache/vpcnet 2>/dev/null && [ -w /var/cache/vpcnet ]; then
		cache=/var/cache/vpcnet
	else
		cache="${XDG_CACHE_HOME:-$HOME/.cache}/vpcnet"
	fi
fi
dir="$cache/$name-$key/$goversion"
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
github.com/coredns/coredns)
	ldflags+=" -X github.com/coredns/coredns/coremain.GitCommit=module-proxy-$version"
	;;
github.com/aws/amazon-vpc-cni-k8s)
	# Its Makefile's -X names pkg/version/info without the module path,
	# which sets nothing. The package's path makes ipamd's log and
	# awscni_build_info name the release; ipamd refuses a plugin whose
	# version differs from its own, so the plugins' main.version is set
	# to the same.
	ldflags+=" -X github.com/aws/amazon-vpc-cni-k8s/pkg/version.Version=$version -X main.version=$version"
	;;
github.com/containernetworking/plugins)
	ldflags+=" -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$version"
	;;
esac

echo "kube-build.sh: building $name $version with $goversion into $dir" >&2
start=$SECONDS
tmp="$(mktemp "$dir/.$name.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
(
	cd "$module"
	if [ -n "$test" ]; then
		CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly" "$go" test -c -trimpath -tags "$tags" -ldflags "$ldflags" \
			-o "$tmp" "$pkg"
	else
		CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly" "$go" build -trimpath -tags "$tags" -ldflags "$ldflags" \
			-o "$tmp" "$pkg"
	fi
)
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
echo "kube-build.sh: built $name in $((SECONDS - start))s" >&2
echo "$bin"
