package cniconf

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func egressV4Entry() *EgressV4Conf {
	e := EgressV4(netip.MustParseAddr("10.0.0.10"), 9001, "")
	return &e
}

// The entry aws-node v1.23's entrypoint renders from misc/10-aws.conflist
// for an IPv6 node (ENABLE_V4_EGRESS=true, the defaults otherwise) parses
// to what EgressV4 renders, so an operator's habits carry over.
func TestEgressV4RendersAWSNodesEntry(t *testing.T) {
	awsNode := `{
      "name": "egress-cni",
      "type": "egress-cni",
      "mtu": "9001",
      "enabled": "true",
      "randomizeSNAT": "prng",
      "nodeIP": "10.0.0.10",
      "ipam": {
         "type": "host-local",
         "ranges": [[{"subnet": "169.254.172.0/22"}]],
         "routes": [{"dst": "0.0.0.0/0"}],
         "dataDir": "/run/cni/v6pd/egress-v4-ipam"
      },
      "pluginLogFile": "/var/log/aws-routed-eni/egress-v4-plugin.log",
      "pluginLogLevel": "DEBUG"
    }`
	var got EgressV4Conf
	if err := json.Unmarshal([]byte(awsNode), &got); err != nil {
		t.Fatal(err)
	}
	got.Type, got.LogFile, got.LogLevel = EgressV4Type, "", ""
	if diff := cmp.Diff(*egressV4Entry(), got); diff != "" {
		t.Errorf("EgressV4 differs from aws-node's entry (-ours +aws-node):\n%s", diff)
	}
}

func TestScalarTakesStringsNumbersAndBooleans(t *testing.T) {
	for in, want := range map[string]Scalar{`"9001"`: "9001", `9001`: "9001", `true`: "true", `"true"`: "true", `null`: ""} {
		var s Scalar
		if err := json.Unmarshal([]byte(in), &s); err != nil || s != want {
			t.Errorf("%s: got %q, %v; want %q", in, s, err, want)
		}
	}
	for in, want := range map[string]string{`{"mtu": {}}`: "json: cannot unmarshal object into Go struct field EgressV4Conf.mtu of type string", `{"mtu": [1]}`: "json: cannot unmarshal array into Go struct field EgressV4Conf.mtu of type string"} {
		var c EgressV4Conf
		if err := json.Unmarshal([]byte(in), &c); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
}
