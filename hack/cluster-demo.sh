#!/usr/bin/env bash
# The Kubernetes demo (`make cluster-demo`): the local cloud with a real
# control plane and two real nodes (containerd, kubelet, kube-proxy),
# vpcnet installed from deploy/vpcnet.yaml, ten pods of a Deployment with
# VPC addresses, pod to pod across nodes and pod to a ClusterIP Service,
# all with kubectl; then everything is removed. Needs root.
# VPCNET_DEMO_FAMILY=ipv6 (make cluster-demo FAMILY=ipv6) runs the same on
# an IPv6 single-stack cluster on a dual-stack VPC: pods on IPv6
# addresses of their node's /80, an IPv6 ClusterIP, AAAA from CoreDNS.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/bin"
state="${VPCNET_DEMO_STATE:-/run/vpcnet-kube-demo}"
family="${VPCNET_DEMO_FAMILY:-ipv4}"
ctl() { "$bin/vpcnetctl" sim "$@" --state "$state"; }
k() { "$bin/kube/kubectl" --kubeconfig "$state/kubeconfig" "$@"; }

ctl up --kubernetes --family "$family" --bin "$bin" --repo "$root"
trap 'echo "+ vpcnetctl sim down"; ctl down' EXIT

run() { echo "+ kubectl $*"; k "$@"; }
run get nodes -o wide
# The add-ons as kubeadm and EKS install them: kube-proxy (DaemonSet,
# nftables mode) and CoreDNS (Deployment behind the kube-dns Service).
run -n kube-system rollout status daemonset/kube-proxy --timeout=180s
run -n kube-system rollout status deployment/coredns --timeout=180s
run -n kube-system get pods -o wide
# Ten pods of the test image (built from source, imported into each
# node's containerd: no registry), spread over both nodes.
echo "+ kubectl apply -f - (Deployment web: 10 replicas of vpcnet.local/testserver:local)"
k apply -f - <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
      containers:
        - name: web
          image: vpcnet.local/testserver:local
          imagePullPolicy: Never
          ports: [{containerPort: 8080}]
          readinessProbe: {httpGet: {path: /readyz, port: 8080}, periodSeconds: 2}
YAML
run rollout status deployment/web --timeout=180s
run get pods -o wide
run expose deployment web --port=80 --target-port=8080

# One pod on each node; a client pod on the first node fetches a pod on
# the second, the Service's ClusterIP, and the Service by its name
# through cluster DNS (CoreDNS; the pod's resolv.conf searches
# default.svc.cluster.local).
node1="$(k get nodes -o jsonpath='{.items[0].metadata.name}')"
node2="$(k get nodes -o jsonpath='{.items[1].metadata.name}')"
far="$(k get pods -l app=web --field-selector spec.nodeName="$node2" -o jsonpath='{.items[0].status.podIP}')"
svc="$(k get service web -o jsonpath='{.spec.clusterIP}')"
# An IPv6 address in a URL is bracketed.
bracket() { case "$1" in *:*) echo "[$1]" ;; *) echo "$1" ;; esac; }
far="$(bracket "$far")"
svc="$(bracket "$svc")"
overrides='{"spec":{"nodeName":"'"$node1"'","containers":[{"name":"check","image":"vpcnet.local/testserver:local","imagePullPolicy":"Never","args":["get","http://'"$far"':8080/","http://'"$svc"'/","http://web/"]}]}}'
run run check --image=vpcnet.local/testserver:local --restart=Never --overrides="$overrides"
for _ in $(seq 1 120); do
	phase="$(k get pod check -o jsonpath='{.status.phase}')"
	case "$phase" in Succeeded | Failed) break ;; esac
	sleep 1
done
run logs check
echo "check pod on $node1: $phase"
run delete deployment web --wait
run delete pod check
[ "$phase" = Succeeded ]
