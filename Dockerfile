# syntax=docker/dockerfile:1
#
# vpcnet's image: vpcnetd (the agent, the entrypoint), the vpcnet CNI plugin
# and vpcnet-install (the DaemonSet's init container copies the plugin onto
# the node), vpcnet-budget (the EC2 budget controller's Deployment runs it),
# vpcnetctl for `kubectl exec`, vpcnet-egress-v4 (IPv4 egress of IPv6
# pods, chained with ENABLE_IPv6=true and ENABLE_V4_EGRESS=true, as
# aws-node chains egress-cni), and the reference portmap, bandwidth and
# host-local plugins, which vpcnet-install puts on nodes that lack them:
# the CNI configuration chains bandwidth with ENABLE_BANDWIDTH_PLUGIN=true
# (as aws-node's does), vpcnet-egress-v4 delegates its addresses to
# host-local, and a node's own configurations may chain portmap. Static binaries on distroless, root variant: the agent needs root
# for netlink, nftables and its host paths.
#
#   docker build -t registry.example.com/vpcnet:dev .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... --push .
#
# Building without a Docker daemon (ko): see deploy/README.md.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# The version vpcnet's own go.mod uses for containernetworking/plugins.
ARG CNI_PLUGINS_VERSION=v1.9.1
ENV CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOFLAGS=-trimpath
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w" -o /out/ ./cmd/vpcnetd ./cmd/vpcnet ./cmd/vpcnet-egress-v4 ./cmd/vpcnet-install ./cmd/vpcnet-budget ./cmd/vpcnetctl
# The reference plugins are built from their own module, so vpcnet's
# go.mod need not carry their dependencies. go install puts a
# cross-compiled binary in bin/GOOS_GOARCH; find copes with both layouts.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go install -ldflags="-s -w" github.com/containernetworking/plugins/plugins/meta/portmap@${CNI_PLUGINS_VERSION} \
        github.com/containernetworking/plugins/plugins/meta/bandwidth@${CNI_PLUGINS_VERSION} \
        github.com/containernetworking/plugins/plugins/ipam/host-local@${CNI_PLUGINS_VERSION} && \
    find "$(go env GOPATH)/bin" -type f -name portmap -exec cp {} /out/portmap \;  && \
    find "$(go env GOPATH)/bin" -type f -name bandwidth -exec cp {} /out/bandwidth \;  && \
    find "$(go env GOPATH)/bin" -type f -name host-local -exec cp {} /out/host-local \;  && \
    test -x /out/portmap && test -x /out/bandwidth && test -x /out/host-local

FROM gcr.io/distroless/static-debian12:latest
# vpcnet-install finds the plugins beside itself.
COPY --from=build /out/ /usr/local/bin/
USER 0:0
ENTRYPOINT ["/usr/local/bin/vpcnetd"]
