// Package cniconf renders the CNI network configuration list that makes
// kubelet consider the node's network ready, and installs it atomically.
//
// The agent writes it only once it can serve (DESIGN.md story 5) and leaves
// it in place on shutdown, so an agent upgrade does not flap node readiness.
package cniconf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vpcnet/vpcnet/internal/atomicfile"
)

// DefaultName is the file the agent writes in /etc/cni/net.d. The runtime
// uses the first configuration in name order, and aws-node's
// 10-aws.conflist sorts first: Supersede moves that one aside.
const DefaultName = "10-vpcnet.conflist"

// SupersededSuffix is added to the name of a configuration vpcnet moved
// aside; the runtime reads only .conf, .conflist and .json files, so the
// file stays for an operator to read and no longer decides the network.
const SupersededSuffix = ".superseded-by-vpcnet"

// awsNodeType is the plugin type of the Amazon VPC CNI's configuration.
const awsNodeType = "aws-cni"

// Options describe the node's network configuration list.
type Options struct {
	// NetworkName is the CNI network name, part of every attachment key.
	NetworkName string
	// Socket is the agent's unix socket the plugin dials.
	Socket string
	// HostPorts has vpcnet take the pods' hostPorts (the portMappings
	// capability) and map them itself; no portmap plugin is chained.
	HostPorts bool
	// Bandwidth chains the reference bandwidth plugin for traffic shaping.
	Bandwidth bool
	// Timeout bounds each of the plugin's calls to the agent; the
	// plugin's default when zero. It must outlast the agent's longest
	// wait for an address (VPCNET_ADD_WAIT), or the plugin gives up on
	// an address that is on its way.
	Timeout time.Duration
	// EgressV4, when set, chains the IPv4 egress plugin of IPv6 pods
	// (ENABLE_V4_EGRESS) right after vpcnet, where aws-node chains
	// egress-cni; EgressV4 (the function) renders aws-node's entry.
	EgressV4 *EgressV4Conf
	// IPv6 says the node runs aws-node's IPv6 mode (ENABLE_IPv6): pods
	// get IPv6 addresses.
	IPv6 bool
}

// PluginConf is vpcnet's own entry in the list; the plugin parses the same
// struct so the two cannot drift apart.
type PluginConf struct {
	Type   string `json:"type"`
	Socket string `json:"socket,omitempty"`
	// VethPrefix starts the host-side veth names (AWS_VPC_K8S_CNI_VETHPREFIX);
	// "eni" when empty.
	VethPrefix string `json:"vethPrefix,omitempty"`
	// LogFile receives the plugin's log (AWS_VPC_K8S_PLUGIN_LOG_FILE); the
	// runtime's log (stderr) when empty.
	LogFile string `json:"pluginLogFile,omitempty"`
	// Timeout bounds each call to the agent, as a Go duration; 30s when
	// empty.
	Timeout string `json:"timeout,omitempty"`
	// Capabilities are the runtime arguments vpcnet takes: portMappings,
	// the pod's hostPorts, which vpcnet maps itself.
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	// IPv6 says pods get IPv6 addresses (ENABLE_IPv6=true on the node),
	// wired through fe80::1: the plugin makes the pod's veth before the
	// agent has said which address, so it must know the family first.
	IPv6 bool `json:"ipv6,omitempty"`
	// RuntimeConfig is what the runtime passes for the pod's
	// capabilities; it is never in the file.
	RuntimeConfig *RuntimeConfig `json:"runtimeConfig,omitempty"`
}

// RuntimeConfig carries the arguments of the capabilities vpcnet takes.
type RuntimeConfig struct {
	PortMappings []PortMapEntry `json:"portMappings,omitempty"`
}

// PortMapEntry is one hostPort as the CNI portMappings convention spells
// it (and kubelet and containerd pass it).
type PortMapEntry struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Render returns the conflist document for opts.
func Render(opts Options) ([]byte, error) {
	if opts.NetworkName == "" {
		return nil, fmt.Errorf("render CNI config: network name is empty")
	}
	if opts.Socket == "" {
		return nil, fmt.Errorf("render CNI config: agent socket path is empty")
	}
	self := PluginConf{Type: "vpcnet", Socket: opts.Socket, IPv6: opts.IPv6}
	if opts.Timeout > 0 {
		self.Timeout = opts.Timeout.String()
	}
	if opts.HostPorts {
		self.Capabilities = map[string]bool{"portMappings": true}
	}
	plugins := []any{self}
	if opts.EgressV4 != nil {
		plugins = append(plugins, *opts.EgressV4)
	}
	if opts.Bandwidth {
		plugins = append(plugins, map[string]any{
			"type":         "bandwidth",
			"capabilities": map[string]bool{"bandwidth": true},
		})
	}
	doc := map[string]any{
		"cniVersion": "1.1.0",
		"name":       opts.NetworkName,
		"plugins":    plugins,
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render CNI config: %w", err)
	}
	return append(out, '\n'), nil
}

// Install writes the conflist into dir under name, atomically, creating dir
// if needed. Kubelet and the runtime never see a partial file.
func Install(dir, name string, opts Options) error {
	data, err := Render(opts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install CNI config: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, name), data, 0o644)
}

// Supersede moves aside every Amazon VPC CNI configuration in dir that
// the runtime would pick before vpcnet's file ours: after a switch-over
// aws-node's 10-aws.conflist stays on the node, sorts first, and would
// send every new pod to an ipamd that no longer runs. It returns the
// files moved. A file vpcnet cannot read is left alone: only aws-node's
// own configuration is vpcnet's to retire. Switching back needs nothing:
// aws-node writes its file again, and it sorts first.
func Supersede(dir, ours string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read CNI configurations: %w", err)
	}
	var moved []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name >= ours || !isAWSNodeConf(filepath.Join(dir, name)) {
			continue
		}
		path := filepath.Join(dir, name)
		if err := os.Rename(path, path+SupersededSuffix); err != nil {
			return moved, fmt.Errorf("move aside the Amazon VPC CNI's configuration: %w", err)
		}
		moved = append(moved, path)
	}
	return moved, nil
}

// isAWSNodeConf says whether path is a CNI configuration list whose first
// plugin is the Amazon VPC CNI's.
func isAWSNodeConf(path string) bool {
	switch filepath.Ext(path) {
	case ".conflist", ".conf", ".json":
	default:
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var list struct {
		Type    string `json:"type"`
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if json.Unmarshal(data, &list) != nil {
		return false
	}
	if len(list.Plugins) > 0 {
		return list.Plugins[0].Type == awsNodeType
	}
	return list.Type == awsNodeType
}
