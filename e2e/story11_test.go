package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/fabric"
)

// Story 11: a node switched from the Amazon VPC CNI still carries
// aws-node's iptables chains and its CNI configuration, which sorts before
// vpcnet's (here written after the agent started, so the agent did not
// move it aside): the runtime keeps using the old CNI and pods fail.
// Doctor lists every leftover and what removes it. aws-node's checkpoint
// is not one: vpcnetd hands it back as it stops.
func TestStory11AWSNodeLeftovers(t *testing.T) {
	c := startCluster(t, twoNodes, nil)
	n := c.Nodes[0]
	nsName := filepath.Base(n.NetNS)
	// aws-node's chains, as iptables-nft makes them, in the node's own
	// namespace (the test made it; nothing else sees it).
	for _, args := range [][]string{
		{"add", "table", "ip", "nat"}, {"add", "chain", "ip", "nat", "AWS-SNAT-CHAIN-0"},
		{"add", "table", "ip", "mangle"}, {"add", "chain", "ip", "mangle", "AWS-CONNMARK-CHAIN-0"},
	} {
		cmd := exec.Command("ip", append([]string{"netns", "exec", nsName, "nft"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft %v in %s: %v\n%s", args, nsName, err, out)
		}
	}
	ipam := filepath.Join(n.Dir, "aws-node", "ipam.json")
	if err := os.MkdirAll(filepath.Dir(ipam), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ipam, []byte(`{"version":"vpc-cni-ipam/1","allocations":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	awsConf := filepath.Join(n.ConfDir(), "10-aws.conflist")
	if err := os.WriteFile(awsConf, []byte(`{"cniVersion":"1.0.0","name":"aws-cni","plugins":[{"type":"aws-cni"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}

	// The runtime takes the first configuration in the directory, as
	// containerd does, and its ADD fails: aws-node's plugin is gone.
	files, err := libcni.ConfFiles(n.ConfDir(), []string{".conf", ".conflist", ".json"})
	if err != nil || len(files) == 0 {
		t.Fatalf("CNI configuration directory: %v %v", files, err)
	}
	first, err := libcni.ConfListFromFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	cni := libcni.NewCNIConfig([]string{binDir}, nil)
	var addErr error
	if err := fabric.Do(n.NetNS, func() error {
		_, addErr = cni.AddNetworkList(t.Context(), first, &libcni.RuntimeConf{ContainerID: "story11", NetNS: "/var/run/netns/none", IfName: "eth0"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if addErr == nil || !strings.Contains(addErr.Error(), "aws-cni") {
		t.Errorf("ADD with the runtime's first configuration = %v; want aws-node's missing plugin", addErr)
	}

	res := runDoctor(t, n, "--skip", "kubernetes")
	res.wantFinding(t, "aws-node-leftovers", doctor.Warning, "ip nat AWS-SNAT-CHAIN-0", "iptables -t nat -F/-X AWS-SNAT-CHAIN-0")
	for _, f := range res.report.Findings {
		if f.ID == "aws-node-leftovers" && strings.Contains(f.Fix, ipam) {
			t.Errorf("doctor tells the operator to remove %s, the checkpoint vpcnetd hands back to aws-node: %s", ipam, f.Fix)
		}
	}
	res.wantFinding(t, "aws-node-leftovers", doctor.Warning, "ip mangle AWS-CONNMARK-CHAIN-0", "rm "+awsConf)
	res.wantFinding(t, "cni-config-shadowed", doctor.Error, "10-aws.conflist, 10-vpcnet.conflist", "remove 10-aws.conflist")
}
