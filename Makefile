# vpcnet build and test entry points. `make test` is what CI runs.
GO            ?= go
STATICCHECK   ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS          := ./...
BIN           := $(CURDIR)/bin
# Every build but the race detector's is without cgo: the binaries must be
# static (they run in the local cloud's namespaces and in the image), and
# one setting for lint, the simulation, the cluster tests and the binaries
# lets them share one compilation of the ~1,000 packages beneath them.
# cgo changes package net, so a mixed setting compiled nearly every
# package twice on a machine with an empty cache. The race detector needs
# cgo (unit, kubetest).
export CGO_ENABLED ?= 0
# portmap is chained after vpcnet in the CNI configuration, bandwidth can
# be; vpcnet-egress-v4 (IPv6 pods' IPv4 egress) execs host-local as its
# IPAM, as aws-node's egress-cni does. The reference plugins are built at
# the version go.mod pins.
CNI_PLUGINS   := github.com/containernetworking/plugins/plugins/meta/portmap@v1.9.1 \
                 github.com/containernetworking/plugins/plugins/meta/bandwidth@v1.9.1 \
                 github.com/containernetworking/plugins/plugins/ipam/host-local@v1.9.1

.PHONY: all build build-sim test lint unit kubetest bench bench-awsnode generate demo clean fuzz simtest scale-join scale-up scale-restart scale-churn scale-steady scale-shared scale-failover budget-failover kube-bins aws-node-bins build-image-bins cluster-test cluster-demo conformance netpol netpol-ipv6 mutants

all: build

build:
	$(GO) build $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

# The Kubernetes tests run against a real kube-apiserver, built from the Go
# module proxy on first use (8-10 minutes) and cached in /var/cache/vpcnet;
# etcd comes from Debian's etcd-server. `&&` stops make if the build fails
# instead of letting those tests skip.
unit:
	apiserver="$$(hack/kube-apiserver.sh)" && VPCNET_KUBE_APISERVER="$$apiserver" CGO_ENABLED=1 $(GO) test -race -count=1 $(PKGS)

KUBETEST_PKGS ?= ./internal/kubetest/... ./kube/...
kubetest:
	apiserver="$$(hack/kube-apiserver.sh)" && VPCNET_KUBE_APISERVER="$$apiserver" CGO_ENABLED=1 $(GO) test -race -count=1 $(KUBETEST_PKGS)

test: lint unit

# simtest plays SEEDS seeded schedules of the agent's deterministic
# simulation (agent/simulation) and checks its invariants after every step;
# it ends with "N schedules, 0 invariant violations". A failing seed prints
# the command that replays it with a trace of every step. `make test` runs
# the package's default (200 schedules) with the race detector.
SEEDS ?= 10000
SIMSTEPS ?= 100
simtest:
	$(GO) test -count=1 -v -timeout 30m -run '^TestSimulation$$' ./agent/simulation -seeds $(SEEDS) -steps $(SIMSTEPS)

# mutants applies each one-line safety mutation of mutants/list to a
# scratch copy of the tree (the working tree is never edited), runs that
# mutant's tests (a focused go test, then a simtest of MUTANT_SEEDS that
# stops at its first violation) and writes mutants/RESULTS.md. It fails
# when a mutant survives that the list does not argue equivalent, or no
# longer applies. MUTANTS=name... runs only those (RESULTS.md unchanged).
MUTANT_SEEDS ?= 2000
MUTANTS ?=
mutants:
	MUTANT_SEEDS=$(MUTANT_SEEDS) GO=$(GO) hack/mutants.sh $(MUTANTS)

# scale-* play one scenario of package scale (issue 15): many real agents
# against one EC2 emulator with the account's request buckets, in
# simulated time, printing the figures BENCHMARKS.md quotes. SCALE_FLAGS
# adds vpcnet-scale flags (--nodes, --pods, --set NAME=VALUE,...). A small
# version of each runs in `make test` (go test ./scale).
SCALE_FLAGS ?=
SCALE = $(GO) run ./cmd/vpcnet-scale
scale-join:
	$(SCALE) --scenario join --nodes 1000 --pods 30 $(SCALE_FLAGS)
scale-up:
	$(SCALE) --scenario scale-up --nodes 500 --total-pods 23000 $(SCALE_FLAGS)
scale-restart:
	$(SCALE) --scenario restart --nodes 1000 --pods 30 $(SCALE_FLAGS)
scale-churn:
	$(SCALE) --scenario churn --nodes 200 --pods 20 $(SCALE_FLAGS)
scale-steady:
	$(SCALE) --scenario steady --nodes 1000 --pods 30 $(SCALE_FLAGS)
# scale-shared is the join while another client of the account spends 30%
# of every mutating bucket (--other-share changes it).
scale-shared:
	$(SCALE) --scenario shared --nodes 1000 --pods 30 $(SCALE_FLAGS)
# scale-failover is the join while the budget controller's leader dies
# mid-join and the standby takes its Lease over; it first runs the same
# join without the failover (same seed) to measure each pod's extra
# wait (--baseline=false leaves it out).
scale-failover:
	$(SCALE) --scenario failover --nodes 1000 --pods 30 $(SCALE_FLAGS)

# budget-failover runs the real budget controller's two replicas against
# a kube-apiserver with 300 agents' budget clients in process, crashes
# the leader and reports how long the agents went without a grant, with
# the controller's default Lease timings (15 s, 10 s, 2 s); `make unit`
# runs the same test with short ones.
budget-failover:
	apiserver="$$(hack/kube-apiserver.sh)" && VPCNET_KUBE_APISERVER="$$apiserver" $(GO) test -count=1 -v -run '^TestALeaderCrashUnderLoad$$' ./budget/controller -production-lease

# fuzz runs every fuzz target for FUZZTIME each, one after another: go test
# -fuzz takes one target per package per run, so it loops over what go test
# -list finds. A target fails when go test fails and either wrote a new
# failing input under testdata/fuzz/<target>/ or said anything but Go
# 1.26's spurious "context deadline exceeded" at the end of -fuzztime
# (golang/go#75804, fixed in Go 1.27), which is reported and ignored.
# New failing inputs stay in testdata/fuzz: commit them with the fix.
FUZZTIME ?= 10s
FUZZPKGS ?= $(PKGS)
fuzz:
	@failed=0; \
	for line in $$($(GO) list -f '{{.ImportPath}}={{.Dir}}' $(FUZZPKGS)); do \
		pkg=$${line%%=*}; dir=$${line#*=}; \
		grep -qs '^func Fuzz' "$$dir"/*_test.go || continue; \
		targets=$$($(GO) test -list '^Fuzz' $$pkg) || { echo "$$targets"; failed=1; continue; }; \
		for target in $$(echo "$$targets" | grep '^Fuzz'); do \
			corpus="$$dir/testdata/fuzz/$$target"; \
			before=$$(ls "$$corpus" 2>/dev/null | wc -l); \
			echo "== $$pkg $$target ($(FUZZTIME))"; \
			out=$$($(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1); rc=$$?; \
			after=$$(ls "$$corpus" 2>/dev/null | wc -l); \
			if [ $$rc -eq 0 ]; then continue; fi; \
			if [ $$after -eq $$before ] && echo "$$out" | grep -q '^    context deadline exceeded$$' && \
				! echo "$$out" | grep -q -e 'Failing input written' -e 'panic:'; then \
				echo "   ignored: Go's fuzz coordinator stopped with \"context deadline exceeded\" (golang/go#75804), no failing input"; \
				continue; \
			fi; \
			echo "$$out"; failed=1; \
		done; \
	done; \
	exit $$failed

generate:
	$(GO) generate $(PKGS)

# bench builds the binaries from this tree into a temporary directory, runs
# every scenario of cmd/vpcnet-bench on the local cloud (root: it makes
# network namespaces) plus the Go micro-benchmarks, and rewrites the
# generated sections of BENCHMARKS.md. The JSON record goes to standard
# output after the tables. BENCH_FLAGS adds driver flags, e.g.
# BENCH_FLAGS='--profile /tmp/prof' for CPU profiles. The cold burst runs with a
# kube-apiserver (hack/kube-apiserver.sh: built once, 8 to 10 minutes, then
# cached) and Debian's etcd, as on a cluster's node. BASELINE=REV builds
# vpcnetd and vpcnet of that git revision too, and the concurrent scenario
# runs them side by side with this tree's (issue 11's before and after).
bench:
	@bin=$$(mktemp -d /tmp/vpcnet-bench-bin.XXXXXX) && trap 'rm -rf "$$bin"' EXIT INT TERM && \
	CGO_ENABLED=0 $(GO) build -o "$$bin/" ./cmd/vpcnetd ./cmd/vpcnet ./cmd/vpcnet-egress-v4 ./cmd/vpcnet-bench && \
	GOBIN="$$bin" CGO_ENABLED=0 $(GO) install github.com/containernetworking/plugins/plugins/meta/portmap@v1.9.1 \
		github.com/containernetworking/plugins/plugins/ipam/host-local@v1.9.1 && \
	baseline= && if [ -n "$(BASELINE)" ]; then \
		mkdir "$$bin/src" "$$bin/baseline" && git archive "$(BASELINE)" | tar -x -C "$$bin/src" && \
		(cd "$$bin/src" && CGO_ENABLED=0 $(GO) build -o "$$bin/baseline/" ./cmd/vpcnetd ./cmd/vpcnet) && \
		cp "$$bin/portmap" "$$bin/baseline/" && \
		baseline="--baseline-bin $$bin/baseline --baseline-label $(BASELINE)"; \
	fi && \
	apiserver="$$(hack/kube-apiserver.sh)" && \
	"$$bin/vpcnet-bench" --bin "$$bin" --kube-apiserver "$$apiserver" --command "make bench$(if $(BASELINE), BASELINE=$(BASELINE))" --markdown BENCHMARKS.md $$baseline $(BENCH_FLAGS)

# bench-awsnode runs the Amazon VPC CNI and vpcnet side by side on one
# cluster of real kubelets (issue 24): the same Deployments at the same
# instant on a node of each, timed to Ready, with each node's EC2 calls and
# agent memory; it rewrites its section of BENCHMARKS.md. Root; about 15
# minutes on 2 cores once kube-bins and aws-node-bins are built.
bench-awsnode: build-image-bins kube-bins aws-node-bins
	$(GO) run ./cmd/vpcnet-bench --bin $(BIN) --kube-bin $(KUBE_BIN) --aws-node $(AWS_NODE_BIN) \
		--command "make bench-awsnode" --markdown BENCHMARKS.md $(BENCH_FLAGS) awsnode

# build-sim puts the binaries a node runs, and vpcnetctl, into bin/.
build-sim:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/vpcnetd ./cmd/vpcnet ./cmd/vpcnet-egress-v4 ./cmd/vpcnetctl
	GOBIN=$(BIN) CGO_ENABLED=0 $(GO) install $(CNI_PLUGINS)

# demo runs two nodes, ten pods and every connectivity check on the local
# cloud, then removes everything (needs root for network namespaces).
demo: build-sim
	$(BIN)/vpcnetctl sim demo

# kube-bins links the programs of the Kubernetes tier into bin/kube:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy and kubectl (k8s.io/kubernetes, tools/kube-apiserver and
# tools/kubernetes), containerd 2, its runc shim and ctr (tools/containerd).
# hack/kube-build.sh builds each from the Go module proxy on first use and
# caches it in /var/cache/vpcnet; etcd and runc come from Debian
# (etcd-server, runc).
KUBE_BIN      := $(BIN)/kube
KUBE_PROGRAMS := kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl containerd containerd-shim-runc-v2 ctr coredns
kube-bins:
	@mkdir -p $(KUBE_BIN)
	@for p in $(KUBE_PROGRAMS); do \
		path="$$(hack/kube-build.sh $$p)" || exit 1; \
		ln -sfn "$$path" $(KUBE_BIN)/$$p; \
	done
	@echo "kube-bins: $(KUBE_BIN) has $(KUBE_PROGRAMS)"

# aws-node-bins links the Amazon VPC CNI into bin/aws-node for the
# switch-over tests: its programs at the release tools/aws-node pins
# (hack/kube-build.sh aws-node builds them from the Go module proxy once,
# about 6 minutes on 2 cores, and caches them), and from its module, the
# files its image carries and its own manifest.
AWS_NODE_BIN := $(BIN)/aws-node
aws-node-bins:
	@mkdir -p $(AWS_NODE_BIN)
	@paths="$$(hack/kube-build.sh aws-node)" || exit 1; \
	for path in $$paths; do ln -sfn "$$path" $(AWS_NODE_BIN)/$$(basename "$$path"); done
	@mod="$$(cd tools/aws-node && $(GO) list -m -f '{{.Dir}}' github.com/aws/amazon-vpc-cni-k8s)" && \
	test -n "$$mod" && ln -sfn "$$mod/misc/10-aws.conflist" $(AWS_NODE_BIN)/10-aws.conflist && \
	ln -sfn "$$mod/misc/eni-max-pods.txt" $(AWS_NODE_BIN)/eni-max-pods.txt && \
	ln -sfn "$$mod/config/master/aws-k8s-cni.yaml" $(AWS_NODE_BIN)/aws-k8s-cni.yaml
	@echo "aws-node-bins: $(AWS_NODE_BIN) has the Amazon VPC CNI's programs, files and manifest"

# The vpcnet image holds what the Dockerfile puts in it.
build-image-bins: build-sim
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/vpcnet-install ./cmd/vpcnet-budget

# cluster-test runs the end-to-end tests on real kubelets
# (simcluster/kubecluster): a Deployment over two nodes, pod to pod, a
# ClusterIP Service through kube-proxy, and the field stories that need a
# real kubelet. Root; about 2 minutes per cluster on 2 cores.
cluster-test: build-image-bins kube-bins aws-node-bins
	VPCNET_KUBE_BIN_DIR=$(KUBE_BIN) VPCNET_SIM_BIN_DIR=$(BIN) VPCNET_AWS_NODE_DIR=$(AWS_NODE_BIN) $(GO) test -count=1 -v -timeout 40m ./simcluster/kubecluster/

# cluster-demo brings up the local cloud with Kubernetes, deploys ten pods
# and checks connectivity with kubectl, then removes everything.
# FAMILY=ipv6 does it on an IPv6 single-stack cluster (a dual-stack VPC,
# vpcnet in IPv6 mode).
FAMILY ?= ipv4
cluster-demo: build-image-bins kube-bins
	VPCNET_DEMO_FAMILY=$(FAMILY) hack/cluster-demo.sh

# conformance runs Kubernetes' own e2e tests on a local cluster (package
# conformance): CONFORMANCE=network (the default) is every sig-network
# [Conformance] test plus the pod network's other non-disruptive tests and
# rewrites CONFORMANCE.md; CONFORMANCE=ci is the bounded subset .ci/run
# runs; CONFORMANCE=ipv6 is the network selection on an IPv6 single-stack
# cluster (a dual-stack VPC, vpcnet in IPv6 mode) and rewrites
# CONFORMANCE-ipv6.md. e2e.test and agnhost are built from the Go module proxy at the
# cluster's Kubernetes release (tools/e2e) and cached like the other
# programs; the e2e images are made of them and of Debian's busybox-static,
# bind9-dnsutils, curl, wget, netcat-openbsd, iproute2, socat, conntrack and
# nginx-light, which must be installed (.ci/run installs them). Root.
CONFORMANCE ?= network
conformance: build-image-bins kube-bins
	e2e="$$(hack/kube-build.sh e2e.test)" && agnhost="$$(hack/kube-build.sh agnhost)" && ginkgo="$$(hack/kube-build.sh ginkgo)" && \
	VPCNET_KUBE_BIN_DIR=$(KUBE_BIN) VPCNET_SIM_BIN_DIR=$(BIN) VPCNET_E2E_TEST="$$e2e" VPCNET_AGNHOST="$$agnhost" VPCNET_GINKGO="$$ginkgo" \
	CONFORMANCE=$(CONFORMANCE) CONFORMANCE_COMMAND="make conformance$(if $(filter-out network,$(CONFORMANCE)), CONFORMANCE=$(CONFORMANCE))" \
	CONFORMANCE_REPORT=$(if $(filter network,$(CONFORMANCE)),$(CURDIR)/CONFORMANCE.md,$(if $(filter netpol ipv6 netpol-ipv6,$(CONFORMANCE)),$(CURDIR)/CONFORMANCE-$(CONFORMANCE).md,)) \
	$(GO) test -count=1 -v -timeout 150m -run '^TestConformance$$' ./conformance

# netpol runs Kubernetes' NetworkPolicy e2e tests (every
# [Feature:NetworkPolicy] test of test/e2e/network/netpol) on the local
# cluster and rewrites CONFORMANCE-netpol.md: the judge of vpcnet's policy
# enforcement. Same needs as conformance.
netpol:
	$(MAKE) conformance CONFORMANCE=netpol

# netpol-ipv6 runs the same NetworkPolicy tests on the IPv6 single-stack
# cluster (CONFORMANCE=ipv6's) and rewrites CONFORMANCE-netpol-ipv6.md.
netpol-ipv6:
	$(MAKE) conformance CONFORMANCE=netpol-ipv6

clean:
	rm -rf $(BIN)
