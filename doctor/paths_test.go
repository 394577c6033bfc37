package doctor

import (
	"slices"
	"testing"
)

// Doctor looks where the operator says, else where the agent says, else
// where the DaemonSet puts things; a flag that disagrees with the agent is
// a difference doctor reports.
func TestPathsComeFromTheFlagThenTheAgentThenTheDefault(t *testing.T) {
	agent := map[string]string{
		"VPCNET_STATE_DIR":     "/node/lib",
		"VPCNET_CNI_CONF_DIR":  "/node/net.d",
		"VPCNET_CNI_BIN_DIR":   "/node/bin",
		"VPCNET_EC2_ENDPOINT":  "http://127.0.0.1:8780",
		"VPCNET_IMDS_ENDPOINT": "", // the agent's default
	}
	tests := []struct {
		name  string
		given Paths
		agent map[string]string
		want  Paths
		diffs []PathDifference
	}{
		{"the agent's own", Paths{}, agent,
			Paths{StateDir: "/node/lib", Checkpoint: "/node/lib/checkpoint.json", CNIConfDir: "/node/net.d", CNIBinDir: "/node/bin",
				AWSNodeCheckpoint: "/var/run/aws-node/ipam.json", IMDSEndpoint: DefaultIMDSEndpoint, EC2Endpoint: "http://127.0.0.1:8780", VethPrefix: "eni"}, nil},
		{"the agent did not answer", Paths{}, nil,
			Paths{StateDir: "/var/lib/vpcnet", Checkpoint: "/var/lib/vpcnet/checkpoint.json", CNIConfDir: "/etc/cni/net.d", CNIBinDir: "/opt/cni/bin",
				AWSNodeCheckpoint: "/var/run/aws-node/ipam.json", IMDSEndpoint: DefaultIMDSEndpoint, VethPrefix: "eni"}, nil},
		{"a flag that agrees", Paths{StateDir: "/node/lib/"}, agent,
			Paths{StateDir: "/node/lib/", Checkpoint: "/node/lib/checkpoint.json", CNIConfDir: "/node/net.d", CNIBinDir: "/node/bin",
				AWSNodeCheckpoint: "/var/run/aws-node/ipam.json", IMDSEndpoint: DefaultIMDSEndpoint, EC2Endpoint: "http://127.0.0.1:8780", VethPrefix: "eni"}, nil},
		{"flags that do not", Paths{CNIBinDir: "/opt/cni/bin", Checkpoint: "/backup/checkpoint.json"}, agent,
			Paths{StateDir: "/node/lib", Checkpoint: "/backup/checkpoint.json", CNIConfDir: "/node/net.d", CNIBinDir: "/opt/cni/bin",
				AWSNodeCheckpoint: "/var/run/aws-node/ipam.json", IMDSEndpoint: DefaultIMDSEndpoint, EC2Endpoint: "http://127.0.0.1:8780", VethPrefix: "eni"},
			[]PathDifference{
				{Flag: "cni-bin-dir", Setting: "VPCNET_CNI_BIN_DIR", Given: "/opt/cni/bin", Agent: "/node/bin"},
				{Flag: "checkpoint", Setting: "VPCNET_STATE_DIR", Given: "/backup/checkpoint.json", Agent: "/node/lib/checkpoint.json"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, diffs := tt.given.Resolve(tt.agent)
			if got != tt.want {
				t.Errorf("paths\n got %+v\nwant %+v", got, tt.want)
			}
			if !slices.Equal(diffs, tt.diffs) {
				t.Errorf("differences\n got %+v\nwant %+v", diffs, tt.diffs)
			}
		})
	}
}
