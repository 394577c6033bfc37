package dataplane

import (
	"strings"
	"testing"
)

// The expected names are the Amazon VPC CNI's own test vectors
// (pkg/networkutils/names_test.go): a node switching over must find the
// veths of its running pods under the same names.
func TestHostVethNameMatchesTheAmazonVPCCNI(t *testing.T) {
	tests := []struct{ prefix, namespace, pod, want string }{
		{"eni", "kube-system", "coredns-57ff979f67-qqbdh", "enib5faff8a083"},
		{"eni", "kube-system", "coredns-57ff979f67-8ns9b", "eni9571956a6cc"},
		{"eni", "default", "sample-pod", "enicc21c2d7785"},
		{"cali", "kube-system", "coredns-57ff979f67-qqbdh", "calib5faff8a083"},
	}
	for _, tt := range tests {
		if got := HostVethName(tt.prefix, tt.namespace, tt.pod); got != tt.want {
			t.Errorf("HostVethName(%q, %q, %q) = %q, want %q", tt.prefix, tt.namespace, tt.pod, got, tt.want)
		}
		if err := validIfName(HostVethName(tt.prefix, tt.namespace, tt.pod)); err != nil {
			t.Errorf("name for %s/%s is not a valid interface name: %v", tt.namespace, tt.pod, err)
		}
	}
}

func TestValidateVethPrefixAppliesTheAmazonVPCCNIRules(t *testing.T) {
	tests := []struct {
		prefix string
		want   string // "" for valid
	}{
		{"eni", ""},
		{"cali", ""},
		{"", "empty"},
		{"toolong", "longer than 4 characters"},
		{"eth", "reserved"},
		{"vlan", "reserved"},
		{"lo", "reserved"},
		{"a/b", "not allowed"},
	}
	for _, tt := range tests {
		err := ValidateVethPrefix(tt.prefix)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ValidateVethPrefix(%q) = %v, want nil", tt.prefix, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ValidateVethPrefix(%q) = %v, want an error containing %q", tt.prefix, err, tt.want)
		}
	}
}

func TestSubnetGatewayAndENITable(t *testing.T) {
	tests := []struct {
		subnet string
		gw     string
	}{
		{"10.0.1.0/24", "10.0.1.1"},
		{"10.0.1.77/24", "10.0.1.1"},
		{"192.168.64.0/18", "192.168.64.1"},
	}
	for _, tt := range tests {
		if got := SubnetGateway(mustPrefix(tt.subnet)); got.String() != tt.gw {
			t.Errorf("SubnetGateway(%s) = %s, want %s", tt.subnet, got, tt.gw)
		}
	}
	if got := ENITable(1); got != 2 {
		t.Errorf("ENITable(1) = %d, want 2 (device index + 1)", got)
	}
}
