// Package kube is vpcnetd's Kubernetes layer: it finds the node's Node,
// watches what this node needs (its Node, its pods, its ENIConfig),
// records Events, and removes the startup taint once the agent can serve.
// It implements agent.Kube, so the agent never imports client-go.
//
// It runs beside the agent and never blocks it: while the API server is
// unreachable, address management for pods already known goes on, Events
// wait in a bounded queue, the taint waits, and custom networking keeps
// the last ENIConfig it read.
//
// Memory does not grow with the cluster: every watch is filtered by a
// field selector (this Node by metadata.name, pods by spec.nodeName, the
// ENIConfig by metadata.name), pods are kept as name, namespace and UID
// only, and the providerID fallback lists Nodes a page at a time and
// stops at the match.
//
// # API access (for the ClusterRole)
//
// Every request this package makes, so the ClusterRole can grant exactly
// these and nothing more:
//
//	apiGroup               resource    verbs          why
//	""                     nodes       get            find the Node named by MY_NODE_NAME; re-read it before removing the taint
//	""                     nodes       list, watch    the providerID fallback (paged list); the informer on this Node (fieldSelector metadata.name)
//	""                     nodes       patch          remove the startup taint (JSON patch, guarded by a test of the taints read)
//	""                     pods        list, watch    the informer on this node's pods (fieldSelector spec.nodeName)
//	""                     pods        get            the pod an Event is about, when the informer does not have it yet
//	""                     events      create, patch  Events on pods and on the Node (core/v1, client-go's record broadcaster)
//	crd.k8s.amazonaws.com  eniconfigs  list, watch    custom networking only: the informer on the node's ENIConfig (fieldSelector metadata.name)
//
// and, in the budget controller's namespace (a Role, not the ClusterRole):
//
//	coordination.k8s.io    leases      get            the budget controller's Lease only (resourceNames), to find its leader (budget.go)
//
// and, as a non-resource URL, get on /version: the reachability probe while
// the API server is failing. The default system:public-info-viewer role
// grants it to everyone, so the ClusterRole needs no rule for it.
//
// Nothing else is read or written: no update, no delete, no Secrets.
package kube
