package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/ipam"
)

func TestPluginSocketIsRootOnlyAndServesAddDelCheckStatus(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := n.start(t)
	a.waitReady(t)
	sock := n.env["VPCNET_SOCKET"]
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, want 0600", fi.Mode().Perm())
	}
	c := &agentapi.Client{Socket: sock}
	ctx := context.Background()
	at := &agentapi.Attachment{Network: "aws-cni", ContainerId: "abc", IfName: "eth0"}

	st, err := c.Status(ctx, &agentapi.StatusRequest{})
	if err != nil || !st.Ready || len(st.Conditions) != len(conditionOrder(false)) {
		t.Fatalf("Status = %v, %v; want ready with every condition", st, err)
	}
	add, err := c.Add(ctx, &agentapi.AddRequest{Attachment: at, PodNamespace: "default", PodName: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if add.Address == "" || add.SubnetGateway != "10.0.0.1" || add.Mtu != 9001 || add.NodePrimaryIp == "" || len(add.VpcCidrs) != 1 || add.Existing {
		t.Fatalf("Add reply lacks what the plugin needs: %v", add)
	}
	again, err := c.Add(ctx, &agentapi.AddRequest{Attachment: at, PodNamespace: "default", PodName: "web"})
	if err != nil || again.Address != add.Address || !again.Existing {
		t.Fatalf("repeated Add = %v, %v; want %s marked existing, so a failing plugin keeps it", again, err, add.Address)
	}
	chk, err := c.Check(ctx, &agentapi.CheckRequest{Attachment: at})
	if err != nil || chk.Address != add.Address {
		t.Fatalf("Check = %v, %v; want %s", chk, err, add.Address)
	}
	if _, err := c.Add(ctx, &agentapi.AddRequest{Attachment: &agentapi.Attachment{Network: "aws-cni"}}); agentapi.CodeOf(err) != agentapi.InvalidArgument {
		t.Fatalf("Add without a container id = %v, want InvalidArgument", err)
	}
	del, err := c.Del(ctx, &agentapi.DelRequest{Attachment: at})
	if err != nil || !del.Released || del.Address != add.Address {
		t.Fatalf("Del = %v, %v", del, err)
	}
	if _, err := c.Check(ctx, &agentapi.CheckRequest{Attachment: at}); agentapi.CodeOf(err) != agentapi.NotFound {
		t.Fatalf("Check after Del = %v, want NotFound", err)
	}
}

func TestGCReleasesOnlyWhatTheRuntimeNoLongerHas(t *testing.T) {
	w := newWorld(t)
	a := w.node("i-node1", map[string]string{"IP_COOLDOWN_PERIOD": "0"}).start(t)
	a.waitReady(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := a.Add(ctx, key(i), pod(i)); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := a.GC(ctx, "aws-cni", map[ipam.Key]bool{key(0): true, key(2): true})
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0].Key != key(1) {
		t.Fatalf("GC released %v, want only %s", gone, key(1))
	}
	if _, ok := a.lookup(key(0)); !ok {
		t.Fatal("GC released an attachment the runtime still has")
	}
}

// Issue 11, item 9: what the plugin API records must be bounded by the
// rules the plugin and the checkpoint share (a 100,000-character container
// id and K8S_POD_NAMESPACE=../../x were accepted and recorded).
func TestThePluginAPIRefusesAttachmentsAndPodsItCouldNotRecord(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := n.start(t)
	a.waitReady(t)
	c := &agentapi.Client{Socket: n.env["VPCNET_SOCKET"]}
	tests := []struct {
		name string
		req  *agentapi.AddRequest
		want string
	}{
		{"huge container id", &agentapi.AddRequest{Attachment: &agentapi.Attachment{Network: "aws-cni", ContainerId: strings.Repeat("a", 100000), IfName: "eth0"}}, "container"},
		{"namespace that walks paths", &agentapi.AddRequest{Attachment: &agentapi.Attachment{Network: "aws-cni", ContainerId: "abc", IfName: "eth0"}, PodNamespace: "../../x", PodName: "web"}, "namespace"},
		{"interface name with a slash", &agentapi.AddRequest{Attachment: &agentapi.Attachment{Network: "aws-cni", ContainerId: "abc", IfName: "eth/0"}}, "interface"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Add(context.Background(), tt.req)
			if agentapi.CodeOf(err) != agentapi.InvalidArgument || !strings.Contains(strings.ToLower(err.Error()), tt.want) {
				t.Fatalf("Add = %v; want InvalidArgument naming the %s", err, tt.want)
			}
		})
	}
	if v, _ := a.view(context.Background()); len(v.Assignments) != 0 {
		t.Fatalf("refused requests left %d assignments", len(v.Assignments))
	}
}

// vethsFunc is a Veths from a function.
type vethsFunc func(ctx context.Context, name string, index int) error

func (f vethsFunc) DeleteVeth(ctx context.Context, name string, index int) error {
	return f(ctx, name, index)
}

func TestADelThatNamesAVethHasTheAgentDeleteItAfterAnswering(t *testing.T) {
	deleted := make(chan string, 1)
	_, _, c := servingNode(t, vethsFunc(func(_ context.Context, name string, index int) error {
		deleted <- fmt.Sprintf("%s %d", name, index)
		return nil
	}))
	ctx := context.Background()
	at := &agentapi.Attachment{Network: "aws-cni", ContainerId: "abc", IfName: "eth0"}
	if _, err := c.Add(ctx, &agentapi.AddRequest{Attachment: at, PodNamespace: "default", PodName: "web"}); err != nil {
		t.Fatal(err)
	}
	del, err := c.Del(ctx, &agentapi.DelRequest{Attachment: at, HostVeth: "eni0123456789a", HostVethIndex: 42})
	if err != nil || !del.Released || !del.VethDeleting {
		t.Fatalf("Del = %+v, %v; want released, with the veth left to the agent", del, err)
	}
	select {
	case got := <-deleted:
		if got != "eni0123456789a 42" {
			t.Errorf("the agent deleted %q, want the veth the DEL named", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never deleted the veth")
	}
	// A DEL naming no veth (the plugin deleted it) asks nothing of it.
	if del, err := c.Del(ctx, &agentapi.DelRequest{Attachment: at}); err != nil || del.VethDeleting {
		t.Errorf("Del without a veth = %+v, %v", del, err)
	}
}

func TestAnAgentWithoutAVethDeleterLeavesTheVethToThePlugin(t *testing.T) {
	_, _, c := servingNode(t, nil)
	del, err := c.Del(context.Background(), &agentapi.DelRequest{
		Attachment: &agentapi.Attachment{Network: "aws-cni", ContainerId: "abc", IfName: "eth0"}, HostVeth: "eni0123456789a", HostVethIndex: 42})
	if err != nil || del.VethDeleting {
		t.Errorf("Del = %+v, %v; want the veth left to the plugin", del, err)
	}
}
