#!/usr/bin/env bash
# Prints the path of a kube-apiserver binary for the Kubernetes test tier
# (internal/kubetest), building it from the Go module proxy only when the
# cache lacks it. The build (module tools/kube-apiserver) takes 8 to 10
# minutes on a 2-core machine and about 80 MiB of module downloads; the
# cache makes every later run instant.
#
#   export VPCNET_KUBE_APISERVER="$(hack/kube-apiserver.sh)"
#
# The cache is keyed by the kubernetes version (read from
# tools/kube-apiserver/go.mod) and the Go version. It lives in
# $VPCNET_CACHE_DIR, else /var/cache/vpcnet when writable (root, CI), else
# ${XDG_CACHE_HOME:-~/.cache}/vpcnet. Build output goes to stderr; stdout
# carries only the path.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$root/tools/kube-apiserver"
go="${GO:-go}"

version="$(awk '$1 == "require" { $1 = ""; $0 = $0 } $1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2 }' "$module/go.mod")"
if [ -z "$version" ]; then
	echo "kube-apiserver.sh: $module/go.mod does not require k8s.io/kubernetes" >&2
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
dir="$cache/kube-apiserver-$version/$goversion"
bin="$dir/kube-apiserver"

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

minor="${version#v1.}"
minor="${minor%%.*}"
ldflags="-s -w"
ldflags+=" -X k8s.io/component-base/version.gitVersion=$version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

echo "kube-apiserver.sh: building kube-apiserver $version with $goversion into $dir (8 to 10 minutes on 2 cores; cached afterwards)" >&2
start=$SECONDS
tmp="$(mktemp "$dir/.kube-apiserver.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
(
	cd "$module"
	CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly" "$go" build -trimpath -ldflags "$ldflags" \
		-o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver
)
"$tmp" --version >&2
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
echo "kube-apiserver.sh: built in $((SECONDS - start))s" >&2
echo "$bin"
