// Package integration tests vpcnetd's Kubernetes layer (package kube)
// against a real kube-apiserver with RBAC on (internal/kubetest), running
// as the DaemonSet's ServiceAccount from deploy/vpcnet.yaml rather than as
// an admin: every request the layer makes must be one the shipped
// ClusterRole allows, and a ClusterRole missing a verb must say which.
//
// The package holds only tests; they skip without VPCNET_KUBE_APISERVER
// (and fail with CI=true), as every kubetest tier does: `make kubetest`.
package integration
