package kube

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vpcnet/vpcnet/agent"
)

func TestTheNodeIsFoundByNameThenByProviderIDAndDisagreeingNamesAreReported(t *testing.T) {
	const otherID = "aws:///us-west-2b/i-0other"
	tests := []struct {
		name     string
		nodeName string // MY_NODE_NAME
		hostname string
		nodes    []runtime.Object
		// want: the Node used, how it was found, and words the mismatch
		// must contain (none: the names agree).
		wantNode, wantBy string
		wantMismatch     []string
	}{
		{
			name: "by MY_NODE_NAME", nodeName: "ip-10-0-0-5.us-west-2.compute.internal", hostname: "ip-10-0-0-5.us-west-2.compute.internal",
			nodes:    []runtime.Object{newNode("ip-10-0-0-5.us-west-2.compute.internal", ourProviderID, internalDNS("ip-10-0-0-5.us-west-2.compute.internal"))},
			wantNode: "ip-10-0-0-5.us-west-2.compute.internal", wantBy: ByNodeName,
		},
		{
			name: "by MY_NODE_NAME with a short host name", nodeName: "ip-10-0-0-5.us-west-2.compute.internal", hostname: "ip-10-0-0-5",
			nodes:    []runtime.Object{newNode("ip-10-0-0-5.us-west-2.compute.internal", ourProviderID)},
			wantNode: "ip-10-0-0-5.us-west-2.compute.internal", wantBy: ByNodeName,
		},
		{
			name: "by MY_NODE_NAME when the Node has no providerID (kind, bare metal)", nodeName: "worker-1",
			nodes:    []runtime.Object{newNode("worker-1", "")},
			wantNode: "worker-1", wantBy: ByNodeName,
		},
		{
			name:     "by providerID when MY_NODE_NAME is empty",
			nodes:    []runtime.Object{newNode("other", otherID), newNode("mine", ourProviderID)},
			wantNode: "mine", wantBy: ByProviderID,
		},
		{
			name: "by providerID when MY_NODE_NAME names no Node", nodeName: "ghost",
			nodes:    []runtime.Object{newNode("mine", ourProviderID)},
			wantNode: "mine", wantBy: ByProviderID,
			wantMismatch: []string{"MY_NODE_NAME is ghost", "this instance's Node (by providerID) is mine"},
		},
		{
			name: "by providerID when MY_NODE_NAME names another machine's Node", nodeName: "other",
			nodes:    []runtime.Object{newNode("other", otherID), newNode("mine", ourProviderID)},
			wantNode: "mine", wantBy: ByProviderID,
			wantMismatch: []string{"MY_NODE_NAME is other", "is mine"},
		},
		{
			name: "another machine's Node when none is this instance's", nodeName: "other",
			nodes:    []runtime.Object{newNode("other", otherID)},
			wantNode: "other", wantBy: ByNodeName,
			wantMismatch: []string{"Node other has providerID " + otherID, "this is instance i-0abc", "another machine's Node"},
		},
		{
			name: "registered by private DNS name on a host with its own name (story 6)", nodeName: "ip-10-0-0-5.us-west-2.compute.internal", hostname: "build-box-7",
			nodes:    []runtime.Object{newNode("ip-10-0-0-5.us-west-2.compute.internal", ourProviderID, internalDNS("ip-10-0-0-5.us-west-2.compute.internal"))},
			wantNode: "ip-10-0-0-5.us-west-2.compute.internal", wantBy: ByNodeName,
			wantMismatch: []string{"the host name is build-box-7 but the Node is named ip-10-0-0-5.us-west-2.compute.internal"},
		},
		{
			name: "registered by host name while EC2 knows another private DNS name", nodeName: "build-box-7", hostname: "build-box-7",
			nodes:    []runtime.Object{newNode("build-box-7", ourProviderID, internalDNS("ip-10-0-0-5.us-west-2.compute.internal"))},
			wantNode: "build-box-7", wantBy: ByNodeName,
			wantMismatch: []string{"EC2's private DNS name is ip-10-0-0-5.us-west-2.compute.internal but the Node is named build-box-7"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, Options{NodeName: tt.nodeName, Hostname: tt.hostname}, fake.NewClientset(tt.nodes...), nil)
			st := h.waitFor(t, "found the Node", nodeFound)
			if st.Node != tt.wantNode || st.NodeFoundBy != tt.wantBy {
				t.Fatalf("Node %q found by %q, want %q by %q", st.Node, st.NodeFoundBy, tt.wantNode, tt.wantBy)
			}
			if len(tt.wantMismatch) == 0 && st.Mismatch != "" {
				t.Fatalf("names reported as disagreeing: %s", st.Mismatch)
			}
			for _, w := range tt.wantMismatch {
				if !strings.Contains(st.Mismatch, w) {
					t.Errorf("mismatch %q does not say %q", st.Mismatch, w)
				}
			}
		})
	}
}

func TestNoNodeForThisInstanceIsReportedWithBothNamesTried(t *testing.T) {
	h := start(t, Options{NodeName: "ghost"}, fake.NewClientset(newNode("other", "aws:///us-west-2b/i-0other")), nil)
	st := h.waitFor(t, "reported the Node missing", func(st agent.KubeState) bool { return st.NodeProblem != "" })
	for _, w := range []string{"no Node is named ghost (MY_NODE_NAME)", "no Node has providerID " + ourProviderID, "downward API"} {
		if !strings.Contains(st.NodeProblem, w) {
			t.Errorf("problem %q does not say %q", st.NodeProblem, w)
		}
	}
	if st.Node != "" {
		t.Errorf("Node %q reported found", st.Node)
	}
}

// pageLog is the list options of every page served; the Node informer
// and the search list from goroutines of their own.
type pageLog struct {
	mu    sync.Mutex // guards pages
	pages []metav1.ListOptions
}

func (l *pageLog) all() []metav1.ListOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.pages)
}

// pagedNodes serves Nodes the way a real API server pages a list: limit
// per page and a continue token, counting the pages it served.
func pagedNodes(t *testing.T, cs *fake.Clientset, nodes []corev1.Node, pages *pageLog) {
	cs.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		pages.mu.Lock()
		pages.pages = append(pages.pages, opts)
		pages.mu.Unlock()
		if opts.Limit <= 0 {
			t.Errorf("Nodes listed without a limit: all of a large cluster at once")
			return true, &corev1.NodeList{Items: nodes}, nil
		}
		from := 0
		if opts.Continue != "" {
			fmt.Sscanf(opts.Continue, "page-from-%d", &from)
		}
		to := min(from+int(opts.Limit), len(nodes))
		list := &corev1.NodeList{Items: nodes[from:to]}
		if to < len(nodes) {
			list.Continue = fmt.Sprintf("page-from-%d", to)
		}
		return true, list, nil
	})
}

func TestProviderIDSearchListsPagesAndStopsAtTheMatch(t *testing.T) {
	var nodes []corev1.Node
	for i := range 10 {
		nodes = append(nodes, *newNode(fmt.Sprintf("n%d", i), fmt.Sprintf("aws:///us-west-2a/i-%d", i)))
	}
	nodes[4].Spec.ProviderID = ourProviderID // on the third page of 2
	cs := fake.NewClientset()
	var pages pageLog
	pagedNodes(t, cs, nodes, &pages)
	h := start(t, Options{ListPageSize: 2}, cs, nil)
	st := h.waitFor(t, "found the Node", nodeFound)
	if st.Node != "n4" || st.NodeFoundBy != ByProviderID {
		t.Fatalf("found %q by %q, want n4 by providerID", st.Node, st.NodeFoundBy)
	}
	// The Node informer lists too, with its own field selector; count the
	// search's pages only.
	var search []metav1.ListOptions
	for _, p := range pages.all() {
		if p.FieldSelector == "" {
			search = append(search, p)
		}
	}
	if len(search) != 3 {
		t.Fatalf("search listed %d pages, want 3 (it must stop at the page holding the match): %+v", len(search), search)
	}
	for i, p := range search {
		if p.Limit != 2 {
			t.Errorf("page %d asked for %d Nodes, want the page size 2", i, p.Limit)
		}
	}
	if search[1].Continue == "" || search[2].Continue == "" {
		t.Errorf("later pages did not pass the continue token: %+v", search)
	}
}

func TestProviderIDMatching(t *testing.T) {
	tests := []struct {
		pid  string
		want bool
	}{
		{ourProviderID, true},
		{"aws:///us-west-2/i-0abc", true},          // region instead of zone
		{"aws://i-0abc", true},                     // zone left out
		{"aws:///us-west-2a/i-0abcd", false},       // another instance whose ID starts alike
		{"aws:///us-west-2a/i-0other", false},      // another instance
		{"gce://project/us-west-2a/i-0abc", false}, // another provider
		{"", false},
	}
	for _, tt := range tests {
		if got := isInstance(tt.pid, inst); got != tt.want {
			t.Errorf("isInstance(%q) = %v, want %v", tt.pid, got, tt.want)
		}
	}
}

func TestSameHostTreatsAShortNameAsItsFQDN(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"ip-10-0-0-5.ec2.internal", "IP-10-0-0-5.ec2.internal.", true},
		{"ip-10-0-0-5", "ip-10-0-0-5.ec2.internal", true},
		{"ip-10-0-0-5.ec2.internal", "ip-10-0-0-5", true},
		{"ip-10-0-0-5.ec2.internal", "ip-10-0-0-5.us-west-2.compute.internal", false},
		{"build-box-7", "ip-10-0-0-5.ec2.internal", false},
	}
	for _, tt := range tests {
		if got := sameHost(tt.a, tt.b); got != tt.want {
			t.Errorf("sameHost(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
