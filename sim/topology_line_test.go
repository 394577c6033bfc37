package sim_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/sim"
)

// lineTopology numbers its lines so the cases below can say where each
// mistake is.
const lineTopology = `region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
  - id: subnet-b
    az: us-west-2a
    cidr: 10.0.16.0/20
securityGroups: [sg-0sim]
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
attachDelay: 2s
`

// A mistake in a topology file is reported as FILE:LINE with what is
// wrong in the file's own terms (YAML fields, not Go or JSON), so the
// user can go straight to it. It used to say "error unmarshaling JSON"
// with no line.
func TestLoadTopologyNamesFileAndLine(t *testing.T) {
	tests := []struct {
		name    string
		old     string
		new     string
		line    int
		want    string
		notWant string
	}{
		{"unknown field in a nested entry", "    cidr: 10.0.16.0/20", "    cidr: 10.0.16.0/20\n    zone: b", 8, `subnets[1]: unknown field "zone"`, "JSON"},
		{"unknown top-level field", "attachDelay: 2s", "attachDelya: 2s", 11, `unknown field "attachDelya"`, "JSON"},
		{"wrong kind of value", "cidrs: [10.0.0.0/16]", "cidrs: 10.0.0.0/16", 2, "vpc.cidrs: want a list", "JSON"},
		{"bad duration", "attachDelay: 2s", "attachDelay: soon", 11, `duration "soon"`, "JSON"},
		{"validation: subnet outside the VPC", "cidr: 10.0.16.0/20", "cidr: 10.1.16.0/20", 5, "outside the VPC", ""},
		{"validation: unknown subnet of an instance", "subnet: subnet-a}", "subnet: subnet-z}", 10, "subnet-z", ""},
		// yaml counts this one from the line before the broken flow.
		{"YAML syntax", "  - {id: i-node1", "  - {id: i-node1 [", 9, "did not find expected", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(lineTopology, tt.old) {
				t.Fatalf("test bug: %q not in the topology", tt.old)
			}
			path := filepath.Join(t.TempDir(), "topo.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(lineTopology, tt.old, tt.new, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := sim.LoadTopology(path)
			if err == nil {
				t.Fatal("LoadTopology accepted it")
			}
			msg := err.Error()
			wantWhere := path + ":" + strconv.Itoa(tt.line) + ":"
			if !strings.Contains(msg, wantWhere) || !strings.Contains(msg, tt.want) || (tt.notWant != "" && strings.Contains(msg, tt.notWant)) {
				t.Errorf("error %q; want %q and %q", msg, wantWhere, tt.want)
			}
		})
	}
}
