package cniconf

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"reflect"
	"strconv"
)

// The IPv4 egress plugin of IPv6 pods (ENABLE_V4_EGRESS), vpcnet's
// counterpart of the Amazon VPC CNI's egress-cni. Its entry follows
// vpcnet's in the list, as egress-cni follows aws-cni in 10-aws.conflist,
// with the same fields and the same values aws-node's entrypoint renders.
const (
	// EgressV4Type is the plugin's binary in the CNI bin directory.
	EgressV4Type = "vpcnet-egress-v4"
	// EgressV4Subnet is aws-node's range of node-local pod addresses.
	EgressV4Subnet = "169.254.172.0/22"
	// EgressV4DataDir is where host-local keeps the allocations:
	// aws-node's directory, so that both see the same addresses in use
	// after a switch-over in either direction.
	EgressV4DataDir = "/run/cni/v6pd/egress-v4-ipam"
	// EgressV4IfName is the egress interface in the pod, aws-node's name.
	EgressV4IfName = "v4if0"
)

// EgressV4Conf is the egress plugin's entry in the list; the plugin
// parses the same struct. Field names and values are aws-node's: mtu and
// enabled are strings there ("9001", "true"), and JSON numbers and
// booleans are taken too.
type EgressV4Conf struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	// MTU of the egress veth (aws-node: POD_MTU, else AWS_VPC_ENI_MTU).
	MTU Scalar `json:"mtu,omitempty"`
	// Enabled is "true" to wire egress; anything else passes the
	// previous result through, as aws-node's plugin does.
	Enabled Scalar `json:"enabled,omitempty"`
	// RandomizeSNAT is AWS_VPC_K8S_CNI_RANDOMIZESNAT: prng (the default,
	// fully random ports), hashrandom or none.
	RandomizeSNAT string `json:"randomizeSNAT,omitempty"`
	// NodeIP is the node's primary IPv4 address, the SNAT source.
	NodeIP string `json:"nodeIP,omitempty"`
	// IfName is the pod's egress interface; aws-node always uses v4if0
	// and ignores the field, so only that value is accepted.
	IfName string `json:"ifName,omitempty"`
	// IPAM is the delegated IPAM plugin's section, passed to it whole.
	IPAM EgressV4IPAM `json:"ipam"`
	// LogFile receives the plugin's log (AWS_VPC_K8S_EGRESS_V4_PLUGIN_LOG_FILE);
	// the runtime's log (stderr) when empty.
	LogFile string `json:"pluginLogFile,omitempty"`
	// LogLevel is aws-node's pluginLogLevel: debug adds the IPAM result
	// and the wiring asked for to what the plugin changed.
	LogLevel string `json:"pluginLogLevel,omitempty"`
}

// EgressV4IPAM is the part of the ipam section the plugin reads.
type EgressV4IPAM struct {
	Type    string        `json:"type"`
	Ranges  [][]IPAMRange `json:"ranges,omitempty"`
	Routes  []IPAMRoute   `json:"routes,omitempty"`
	DataDir string        `json:"dataDir,omitempty"`
}

// IPAMRange is one of host-local's ranges.
type IPAMRange struct {
	Subnet     string `json:"subnet"`
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
	Gateway    string `json:"gateway,omitempty"`
}

// IPAMRoute is one route IPAM gives the pod.
type IPAMRoute struct {
	Dst string `json:"dst"`
	GW  string `json:"gw,omitempty"`
}

// Scalar is a JSON string, number or boolean kept as its text: aws-node
// writes "9001" and "true", a hand-written list may say 9001 and true.
type Scalar string

// UnmarshalJSON takes a string, number or boolean.
func (s *Scalar) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = Scalar(v)
	case string(b) == "true" || string(b) == "false":
		*s = Scalar(b)
	case string(b) == "null":
		*s = ""
	default:
		if _, err := strconv.ParseFloat(string(b), 64); err != nil {
			// A type error, which encoding/json completes with the
			// field's name.
			return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[string]()}
		}
		*s = Scalar(b)
	}
	return nil
}

// EgressV4 returns the entry aws-node's entrypoint would render for a node
// whose primary IPv4 address is nodeIP, with pods' MTU mtu and SNAT port
// mode randomizeSNAT ("" for prng).
func EgressV4(nodeIP netip.Addr, mtu int, randomizeSNAT string) EgressV4Conf {
	if randomizeSNAT == "" {
		randomizeSNAT = "prng"
	}
	return EgressV4Conf{
		Type: EgressV4Type, Name: "egress-cni",
		MTU: Scalar(strconv.Itoa(mtu)), Enabled: "true",
		RandomizeSNAT: randomizeSNAT, NodeIP: nodeIP.String(),
		IPAM: EgressV4IPAM{
			Type:    "host-local",
			Ranges:  [][]IPAMRange{{{Subnet: EgressV4Subnet}}},
			Routes:  []IPAMRoute{{Dst: "0.0.0.0/0"}},
			DataDir: EgressV4DataDir,
		},
	}
}

// jsonKind names the kind of JSON value b starts.
func jsonKind(b []byte) string {
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value " + string(b)
}
