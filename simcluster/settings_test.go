package simcluster

import (
	"strings"
	"testing"
)

// Settings for the agents are checked as a node's vpcnetd would read
// them, together with the local cloud's own, before anything starts.
func TestAgentSettingsAreCheckedAsTheAgentReadsThem(t *testing.T) {
	tests := []struct {
		env  []string
		want string // "" for accepted
	}{
		{[]string{"WARM_IP_TARGET=5", "MINIMUM_IP_TARGET=10", "CLUSTER_NAME=mine"}, ""},
		{[]string{"WARM_IP_TARGET=banana"}, `invalid settings: WARM_IP_TARGET="banana"`},
		{[]string{"POD_MTU=9001", "AWS_VPC_ENI_MTU=1500"}, "must not exceed AWS_VPC_ENI_MTU"},
		{[]string{"INTROSPECTION_BIND_ADDRESS=127.0.0.1:1"}, "the local cloud sets it for each node itself"},
		{[]string{"=5"}, "want NAME=VALUE"},
	}
	for _, tt := range tests {
		err := CheckAgentEnv(tt.env)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q refused: %v", tt.env, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: error %v, want one saying %q", tt.env, err, tt.want)
		}
	}
}
