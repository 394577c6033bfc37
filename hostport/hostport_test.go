package hostport

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/ipam"
)

func TestParseTakesWhatKubernetesSendsAndNamesWhatItRefuses(t *testing.T) {
	tests := []struct {
		name                    string
		hostPort, containerPort int
		protocol, hostIP        string
		ipv6                    bool
		want                    Mapping
		skip                    bool
		err                     string
	}{
		{name: "tcp by default", hostPort: 8080, containerPort: 80, want: Mapping{HostPort: 8080, ContainerPort: 80, Protocol: TCP}},
		{name: "upper-case protocol", hostPort: 53, containerPort: 53, protocol: "UDP", want: Mapping{HostPort: 53, ContainerPort: 53, Protocol: UDP}},
		{name: "sctp", hostPort: 9, containerPort: 9, protocol: "sctp", want: Mapping{HostPort: 9, ContainerPort: 9, Protocol: SCTP}},
		{name: "one host address", hostPort: 80, containerPort: 8080, hostIP: "10.0.0.10",
			want: Mapping{HostIP: netip.MustParseAddr("10.0.0.10"), HostPort: 80, ContainerPort: 8080, Protocol: TCP}},
		{name: "0.0.0.0 is every address", hostPort: 80, containerPort: 80, hostIP: "0.0.0.0", want: Mapping{HostPort: 80, ContainerPort: 80, Protocol: TCP}},
		{name: "IPv6 host address skipped for an IPv4 pod", hostPort: 80, containerPort: 80, hostIP: "fd00::1", skip: true},
		{name: "IPv6 host address of an IPv6 pod", hostPort: 80, containerPort: 80, hostIP: "fd00::1", ipv6: true,
			want: Mapping{HostIP: netip.MustParseAddr("fd00::1"), HostPort: 80, ContainerPort: 80, Protocol: TCP}},
		{name: ":: is every address of an IPv6 pod", hostPort: 80, containerPort: 80, hostIP: "::", ipv6: true, want: Mapping{HostPort: 80, ContainerPort: 80, Protocol: TCP}},
		{name: "no host address applies to an IPv6 pod", hostPort: 80, containerPort: 80, ipv6: true, want: Mapping{HostPort: 80, ContainerPort: 80, Protocol: TCP}},
		{name: "IPv4 host address skipped for an IPv6 pod", hostPort: 80, containerPort: 80, hostIP: "10.0.0.10", ipv6: true, skip: true},
		{name: "hostPort 0", hostPort: 0, containerPort: 80, err: "hostPort 0 is not a port number"},
		{name: "containerPort too large", hostPort: 80, containerPort: 70000, err: "containerPort 70000 is not a port number"},
		{name: "unknown protocol", hostPort: 80, containerPort: 80, protocol: "icmp", err: `protocol "icmp" is not tcp, udp or sctp`},
		{name: "garbage host address", hostPort: 80, containerPort: 80, hostIP: "node-a", err: `hostIP "node-a" is not an IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, skip, err := Parse(tt.hostPort, tt.containerPort, tt.protocol, tt.hostIP, tt.ipv6)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, %v; want an error saying %q", got, err, tt.err)
				}
				return
			}
			if err != nil || skip != tt.skip || got != tt.want {
				t.Fatalf("Parse = %+v, skip %v, %v; want %+v, skip %v", got, skip, err, tt.want, tt.skip)
			}
		})
	}
}

func entry(container string, addr string, ms ...Mapping) Entry {
	return Entry{Key: ipam.Key{Network: "aws-cni", ContainerID: container, IfName: "eth0"},
		Pod: ipam.Pod{Namespace: "default", Name: container}, Addr: netip.MustParseAddr(addr), Mappings: ms}
}

func TestTwoPodsCannotTakeTheSamePackets(t *testing.T) {
	tcp80 := Mapping{HostPort: 80, ContainerPort: 80, Protocol: TCP}
	on := func(ip string, m Mapping) Mapping { m.HostIP = netip.MustParseAddr(ip); return m }
	tests := []struct {
		name         string
		first, other Mapping
		clash        bool
	}{
		{"same port and protocol", tcp80, tcp80, true},
		{"one on every address, one on one", tcp80, on("10.0.0.10", tcp80), true},
		{"two different host addresses", on("10.0.0.10", tcp80), on("10.0.0.11", tcp80), false},
		{"another protocol", tcp80, Mapping{HostPort: 80, ContainerPort: 80, Protocol: UDP}, false},
		{"another port", tcp80, Mapping{HostPort: 81, ContainerPort: 80, Protocol: TCP}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Set
			first := tt.first
			if err := s.Put(entry("a", "10.0.0.21", first)); err != nil {
				t.Fatal(err)
			}
			err := s.Put(entry("b", "10.0.0.22", tt.other))
			if tt.clash != (err != nil) {
				t.Fatalf("second Put = %v, want clash %v", err, tt.clash)
			}
			if tt.clash && !strings.Contains(err.Error(), "default/a") {
				t.Errorf("error %q does not name the pod that holds the port", err)
			}
			// The attachment itself may always change its own mappings.
			if err := s.Put(entry("a", "10.0.0.21", first, Mapping{HostPort: 443, ContainerPort: 443, Protocol: TCP})); err != nil {
				t.Errorf("a repeated ADD of the same pod = %v", err)
			}
		})
	}
}

func TestTheFileReadsBackAndRefusesWhatThePluginCouldNotHaveSent(t *testing.T) {
	var s Set
	if err := s.Put(entry("a", "10.0.0.21", Mapping{HostIP: netip.MustParseAddr("10.0.0.10"), HostPort: 53, ContainerPort: 5353, Protocol: UDP})); err != nil {
		t.Fatal(err)
	}
	// An IPv6 pod's (ENABLE_IPv6), with a host address of its family.
	if err := s.Put(entry("b", "2600:1f14::5", Mapping{HostIP: netip.MustParseAddr("2600:1f14::10"), HostPort: 80, ContainerPort: 8080, Protocol: TCP})); err != nil {
		t.Fatal(err)
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.Encode()
	if string(again) != string(data) {
		t.Errorf("read back and written again:\n%s\nwant:\n%s", again, data)
	}
	for name, bad := range map[string]string{
		"truncated":                          string(data[:len(data)/2]),
		"newer version":                      `{"version":2,"entries":[]}`,
		"port 0":                             `{"version":1,"entries":[{"key":{"Network":"n","ContainerID":"c","IfName":"eth0"},"addr":"10.0.0.1","mappings":[{"hostPort":0,"containerPort":1,"protocol":"tcp"}]}]}`,
		"no address":                         `{"version":1,"entries":[{"key":{"Network":"n","ContainerID":"c","IfName":"eth0"},"mappings":[{"hostPort":1,"containerPort":1,"protocol":"tcp"}]}]}`,
		"a clash":                            `{"version":1,"entries":[{"key":{"Network":"n","ContainerID":"c","IfName":"eth0"},"addr":"10.0.0.1","mappings":[{"hostPort":1,"containerPort":1,"protocol":"tcp"}]},{"key":{"Network":"n","ContainerID":"d","IfName":"eth0"},"addr":"10.0.0.2","mappings":[{"hostPort":1,"containerPort":1,"protocol":"tcp"}]}]}`,
		"a host address of the other family": `{"version":1,"entries":[{"key":{"Network":"n","ContainerID":"c","IfName":"eth0"},"addr":"fd00::1","mappings":[{"hostIP":"10.0.0.10","hostPort":1,"containerPort":1,"protocol":"tcp"}]}]}`,
		"upper-case kept":                    `{"version":1,"entries":[{"key":{"Network":"n","ContainerID":"c","IfName":"eth0"},"addr":"10.0.0.1","mappings":[{"hostPort":1,"containerPort":1,"protocol":"TCP"}]}]}`,
	} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode accepted a file with %s", name)
		}
	}
}
