package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/netfacts"
)

const minimalConf = `{"cniVersion":"1.1.0","name":"vpcnet","type":"vpcnet"}`

// A 100 MB configuration used to be read whole and accepted. The binary
// must stop reading past 1 MiB and say so, whatever the verb.
func TestAConfigurationOverOneMiBIsRefusedWithItsLimit(t *testing.T) {
	big := append([]byte(minimalConf), bytes.Repeat([]byte(" "), maxStdin)...)
	for _, verb := range []string{"ADD", "DEL", "CHECK", "STATUS", "GC"} {
		t.Run(verb, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(pluginDir, "vpcnet"))
			// Should the limit ever fail, the verb must find nothing to
			// touch: no such namespace, interface or agent.
			none := filepath.Join(t.TempDir(), "none")
			cmd.Env = append(os.Environ(), "CNI_COMMAND="+verb, "CNI_CONTAINERID=abc", "CNI_NETNS="+none,
				"CNI_IFNAME=vpcnettest0", "CNI_PATH="+pluginDir, "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=web")
			big := bytes.Replace(big, []byte(`"type"`), []byte(`"socket":"`+none+`","type"`), 1)
			cmd.Stdin = bytes.NewReader(big)
			out, err := cmd.Output()
			if err == nil {
				t.Fatalf("the plugin accepted %d bytes of configuration: %s", len(big), out)
			}
			var e types.Error
			if jerr := json.Unmarshal(out, &e); jerr != nil {
				t.Fatalf("stdout is not a CNI error (%v): %q", jerr, out)
			}
			if e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, "longer than 1048576 bytes (1 MiB)") {
				t.Errorf("CNI error %d %q, want %d naming the 1 MiB limit", e.Code, e.Msg, types.ErrInvalidNetworkConfig)
			}
		})
	}
}

func TestParseConfRefusesWhatTheAgentCouldNotRecord(t *testing.T) {
	tests := []struct {
		name, stdin string
		code        uint
		want        string
	}{
		{"over the limit", minimalConf + strings.Repeat(" ", maxStdin), types.ErrInvalidNetworkConfig, "longer than 1048576 bytes"},
		{"no network name", `{"cniVersion":"1.1.0","type":"vpcnet"}`, types.ErrInvalidNetworkConfig, `field name: network name "": is empty`},
		{"network name with a slash", `{"cniVersion":"1.1.0","name":"a/b","type":"vpcnet"}`, types.ErrInvalidNetworkConfig, `field name: network name "a/b": must be a letter or digit`},
		{"prevResult not a result", `{"cniVersion":"1.1.0","name":"n","type":"vpcnet","prevResult":{"ips":[{"address":"x"}]}}`, types.ErrDecodingFailure, "field prevResult"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConf([]byte(tt.stdin))
			wantCNIError(t, err, tt.code, tt.want)
		})
	}
	if _, err := parseConf([]byte(minimalConf + strings.Repeat(" ", maxStdin-len(minimalConf)))); err != nil {
		t.Errorf("a configuration of exactly 1 MiB was refused: %v", err)
	}
}

func TestRequirePodRefusesNamesKubernetesWouldNot(t *testing.T) {
	tests := []struct{ args, want string }{
		{"K8S_POD_NAMESPACE=../../x;K8S_POD_NAME=web", `CNI_ARGS: pod namespace "../../x"`},
		{"K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + strings.Repeat("w", 300), "is longer than 253 bytes"},
		{"K8S_POD_NAMESPACE=Default;K8S_POD_NAME=web", `pod namespace "Default"`},
	}
	for _, tt := range tests {
		p, err := parseArgs(tt.args)
		if err != nil {
			t.Fatalf("parseArgs(%q): %v", tt.args, err)
		}
		wantCNIError(t, p.requirePod(), types.ErrInvalidEnvironmentVariables, tt.want)
	}
}

// DEL of a pod whose names ADD would refuse must not name a host veth
// after them: no ADD wired it, and the name must not reach the kernel.
func TestHostVethIsUnknownForAPodADDWouldRefuse(t *testing.T) {
	c, err := parseConf([]byte(minimalConf))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.hostVeth(podArgs{namespace: "../../x", name: "web"}); got != "" {
		t.Errorf("hostVeth of an invalid pod = %q, want none", got)
	}
	if got, want := c.hostVeth(podArgs{namespace: "default", name: "sample-pod"}), "enicc21c2d7785"; got != want {
		t.Errorf("hostVeth = %q, want %q", got, want)
	}
}

// FuzzParseConf feeds the plugin's stdin (prevResult included) to the
// parser every verb starts with: it never panics, refuses with a CNI
// error, and what it accepts has a valid network name, a socket, a
// positive timeout and a valid veth prefix.
func FuzzParseConf(f *testing.F) {
	f.Add([]byte(minimalConf))
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"vpcnet","type":"vpcnet","socket":"/run/x.sock","timeout":"5s","vethPrefix":"cali","pluginLogFile":"/tmp/x"}`))
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"vpcnet","type":"vpcnet","prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/ns"}],"ips":[{"address":"10.0.0.5/32","gateway":"169.254.1.1","interface":1}],"routes":[{"dst":"0.0.0.0/0","gw":"169.254.1.1"}]}}`))
	f.Add([]byte(`{"cniVersion":"0.4.0","name":"vpcnet","type":"vpcnet","prevResult":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.5/32"}]}}`))
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"vpcnet","type":"vpcnet","cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}]}`))
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"vpcnet","type":"vpcnet","prevResult":{"cniVersion":"9.9.9"}}`))
	f.Add([]byte(`{"name":"x","timeout":"-1s"}`))
	f.Fuzz(func(t *testing.T, stdin []byte) {
		c, err := parseConf(stdin)
		if err != nil {
			if _, ok := err.(*types.Error); !ok {
				t.Fatalf("error %v is a %T, not a CNI error", err, err)
			}
			return
		}
		if len(stdin) > maxStdin {
			t.Fatalf("accepted %d bytes", len(stdin))
		}
		if err := netfacts.ValidateNetworkName(c.Name); err != nil {
			t.Errorf("accepted network name: %v", err)
		}
		if c.plugin.Socket == "" || c.timeout <= 0 {
			t.Errorf("accepted socket %q, timeout %s", c.plugin.Socket, c.timeout)
		}
		if len(c.plugin.VethPrefix) > 4 {
			t.Errorf("accepted veth prefix %q", c.plugin.VethPrefix)
		}
		if c.PrevResult != nil {
			// What DEL and CHECK do next with it must not panic either.
			_, _ = prevAddr(c.PrevResult)
			_ = checkPrevInterfaces(c.PrevResult, "eni0", "eth0")
		}
	})
}

// FuzzParseArgs feeds CNI_ARGS to the parser and the checks ADD applies:
// never a panic, and a pod accepted has names Kubernetes accepts, bounded,
// and a host veth name the kernel accepts.
func FuzzParseArgs(f *testing.F) {
	f.Add("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc")
	f.Add("K8S_POD_NAMESPACE=../../x;K8S_POD_NAME=web")
	f.Add("K8S_POD_NAMESPACE=a;K8S_POD_NAME=b;K8S_POD_NAME=c")
	f.Add(";;=;K8S_POD_NAME==")
	f.Add("K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + strings.Repeat("w", 300))
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseArgs(s)
		if err != nil {
			return
		}
		if err := p.requirePod(); err != nil {
			return
		}
		if len(p.namespace) > netfacts.MaxPodNamespaceLen || len(p.name) > netfacts.MaxPodNameLen {
			t.Fatalf("accepted pod %q/%q", p.namespace, p.name)
		}
		if strings.ContainsAny(p.namespace+p.name, "/;= \x00") {
			t.Fatalf("accepted pod %q/%q", p.namespace, p.name)
		}
		if err := netfacts.ValidateIfName(netfacts.HostVethName("eni", p.namespace, p.name)); err != nil {
			t.Fatalf("veth of pod %q/%q: %v", p.namespace, p.name, err)
		}
	})
}

// The agent waits up to VPCNET_ADD_WAIT (a minute by default) for an
// address on its way and writes its plugin a timeout beyond that: the
// plugin must wait that long, not its own 30 s default, or it gives up
// on an address the agent is about to hand it.
func TestThePluginWaitsAsLongAsTheConfigurationTheAgentWritesSays(t *testing.T) {
	data, err := cniconf.Render(cniconf.Options{NetworkName: "aws-cni", Socket: "/run/vpcnet/vpcnetd.sock", Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	// The runtime adds the list's name and version to the plugin's entry.
	var entry map[string]any
	if err := json.Unmarshal(list.Plugins[0].Bytes, &entry); err != nil {
		t.Fatal(err)
	}
	entry["name"], entry["cniVersion"] = list.Name, list.CNIVersion
	stdin, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseConf(stdin)
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout != 90*time.Second {
		t.Errorf("the plugin waits %s for the agent; the configuration says 90s", c.timeout)
	}
}
