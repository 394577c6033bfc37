package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/sim"
)

// exampleTopology is testdata/example.yaml, the example README.md shows,
// which must keep working exactly as written.
func exampleTopology(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), string(b)) {
		t.Fatal("README.md no longer shows testdata/example.yaml verbatim; update one or the other")
	}
	return string(b)
}

func TestParseTopologyExample(t *testing.T) {
	topo, err := sim.LoadTopology("testdata/example.yaml")
	if err != nil {
		t.Fatalf("LoadTopology: %v", err)
	}
	exampleTopology(t)
	if topo.Region != "us-west-2" || topo.VPC.ID != "vpc-0sim" || len(topo.Subnets) != 2 || topo.Subnets[0].Tags["Name"] != "nodes-a" {
		t.Errorf("topology = %+v", topo)
	}
	if time.Duration(topo.AttachDelay) != 2*time.Second || time.Duration(topo.DetachDelay) != time.Second || time.Duration(topo.IMDSLag) != 500*time.Millisecond {
		t.Errorf("delays = %v %v %v", topo.AttachDelay, topo.DetachDelay, topo.IMDSLag)
	}
	if topo.Throttle.Mutating != (sim.BucketSpec{Burst: 100, Refill: 5}) || topo.Throttle.Describe != (sim.BucketSpec{Burst: 100, Refill: 20}) {
		t.Errorf("throttle = %+v", topo.Throttle)
	}
	f := topo.Faults["AttachNetworkInterface"].Fault()
	if f != (sim.Fault{ErrorRate: 0.1, Code: "InternalError", Latency: 200 * time.Millisecond}) {
		t.Errorf("fault = %+v", f)
	}
	cloud, err := sim.NewCloud(topo, sim.Options{})
	if err != nil {
		t.Fatalf("NewCloud: %v", err)
	}
	defer cloud.Close()
	if got := cloud.Instances(); len(got) != 2 || got[1].Type != "x9.sim" || got[0].PrivateIP.String() != "10.0.0.4" {
		t.Errorf("Instances() = %+v", got)
	}
}

func TestLoadTopologyReadsJSONToo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topo.json")
	json := `{"region":"eu-west-1","vpc":{"id":"vpc-1","cidrs":["172.16.0.0/16"]},
	  "subnets":[{"id":"subnet-1","az":"eu-west-1b","cidr":"172.16.1.0/24"}],
	  "securityGroups":["sg-1"],"instances":[{"id":"i-1","type":"c5.large","subnet":"subnet-1","privateIp":"172.16.1.10"}],
	  "attachDelay":1.5}`
	if err := os.WriteFile(path, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	topo, err := sim.LoadTopology(path)
	if err != nil {
		t.Fatalf("LoadTopology: %v", err)
	}
	if time.Duration(topo.AttachDelay) != 1500*time.Millisecond || topo.Instances[0].PrivateIP != "172.16.1.10" {
		t.Errorf("topology = %+v", topo)
	}
	if _, err := sim.LoadTopology(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("LoadTopology of a missing file succeeded")
	}
}

func TestParseTopologyRejectsMistakes(t *testing.T) {
	example := exampleTopology(t)
	tests := []struct {
		name string
		edit func(string) string
		want string // in the error
	}{
		{"unknown field", func(s string) string { return s + "attachDelya: 1s\n" }, "attachDelya"},
		{"no region", func(s string) string { return strings.Replace(s, "region: us-west-2", "", 1) }, "region"},
		{"subnet outside the VPC", func(s string) string { return strings.Replace(s, "10.0.16.0/20", "10.1.16.0/20", 1) }, "outside the VPC"},
		{"overlapping subnets", func(s string) string { return strings.Replace(s, "10.0.16.0/20", "10.0.0.0/20", 1) }, "overlaps"},
		{"host bits set", func(s string) string { return strings.Replace(s, "10.0.16.0/20", "10.0.16.1/20", 1) }, "host bits"},
		{"AZ of another region", func(s string) string {
			return strings.Replace(s, "az: us-west-2a, cidr: 10.0.16", "az: eu-west-1a, cidr: 10.0.16", 1)
		}, "not in region"},
		{"unknown instance type", func(s string) string { return strings.Replace(s, "type: x9.sim", "type: x10.sim", 1) }, "x10.sim"},
		{"unknown subnet", func(s string) string {
			return strings.Replace(s, "type: x9.sim, subnet: subnet-a", "type: x9.sim, subnet: subnet-z", 1)
		}, "subnet-z"},
		{"bad duration", func(s string) string { return strings.Replace(s, "imdsLag: 500ms", "imdsLag: soon", 1) }, "soon"},
		{"error rate above 1", func(s string) string { return strings.Replace(s, "errorRate: 0.1", "errorRate: 1.5", 1) }, "errorRate"},
		{"fault on an unknown action", func(s string) string {
			return strings.Replace(s, "  AttachNetworkInterface: {", "  AttachNetworkInterfaces: {", 1)
		}, "AttachNetworkInterfaces"},
		{"empty bucket", func(s string) string { return strings.Replace(s, "burst: 100, refill: 5", "burst: 0, refill: 5", 1) }, "burst"},
		{"no security group", func(s string) string { return strings.Replace(s, "securityGroups: [sg-0sim]", "securityGroups: []", 1) }, "securityGroups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sim.ParseTopology([]byte(tt.edit(example)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestNewCloudRejectsATakenPrimaryAddress(t *testing.T) {
	topo, err := sim.ParseTopology([]byte(strings.Replace(exampleTopology(t), "type: x9.sim, subnet: subnet-a", "type: x9.sim, subnet: subnet-a, privateIp: 10.0.0.4", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.NewCloud(topo, sim.Options{}); err == nil || !strings.Contains(err.Error(), "10.0.0.4") {
		t.Errorf("NewCloud with two instances on 10.0.0.4: %v", err)
	}
}
