package netfacts

import (
	"net/netip"
	"testing"
)

func TestRouteTableIsMainForThePrimaryENIAndDeviceIndexPlusOneOtherwise(t *testing.T) {
	for _, tt := range []struct{ index, want int }{{0, MainTable}, {1, 2}, {2, 3}, {14, 15}} {
		if got := RouteTable(tt.index); got != tt.want {
			t.Errorf("RouteTable(%d) = %d, want %d", tt.index, got, tt.want)
		}
	}
}

func TestSubnetGatewayIsTheFirstAddressAfterTheNetworkAddress(t *testing.T) {
	for _, tt := range []struct{ subnet, want string }{
		{"10.0.1.0/24", "10.0.1.1"},
		{"10.0.1.7/24", "10.0.1.1"}, // an unmasked prefix names the same subnet
		{"100.64.16.0/20", "100.64.16.1"},
		{"192.168.0.16/28", "192.168.0.17"},
	} {
		if got := SubnetGateway(netip.MustParsePrefix(tt.subnet)); got.String() != tt.want {
			t.Errorf("SubnetGateway(%s) = %s, want %s", tt.subnet, got, tt.want)
		}
	}
	if got := SubnetGateway(netip.Prefix{}); got.IsValid() {
		t.Errorf("SubnetGateway of no prefix = %s, want the invalid address", got)
	}
}

// The expected names are the Amazon VPC CNI's own test vectors
// (pkg/networkutils/names_test.go): a node switching over must find the
// veths of its running pods under the same names.
func TestHostVethNameIsTheAmazonVPCCNIName(t *testing.T) {
	for _, tt := range []struct{ prefix, ns, pod, want string }{
		{"eni", "kube-system", "coredns-57ff979f67-qqbdh", "enib5faff8a083"},
		{"eni", "kube-system", "coredns-57ff979f67-8ns9b", "eni9571956a6cc"},
		{"eni", "default", "sample-pod", "enicc21c2d7785"},
		{"cali", "kube-system", "coredns-57ff979f67-qqbdh", "calib5faff8a083"},
	} {
		got := HostVethName(tt.prefix, tt.ns, tt.pod)
		if got != tt.want {
			t.Errorf("HostVethName(%q, %q, %q) = %q, want %q", tt.prefix, tt.ns, tt.pod, got, tt.want)
		}
		if err := ValidateIfName(got); err != nil {
			t.Errorf("HostVethName(%q, %q, %q) is not an interface name: %v", tt.prefix, tt.ns, tt.pod, err)
		}
	}
}

func TestTheLastDeviceIndexHasATableBelowTheKernelsReservedOnes(t *testing.T) {
	if got := RouteTable(MaxDeviceIndex); got >= 253 {
		t.Errorf("RouteTable(MaxDeviceIndex) = %d, want below 253 (default, main and local)", got)
	}
}
