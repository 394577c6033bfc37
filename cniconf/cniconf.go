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

	"github.com/vpcnet/vpcnet/internal/atomicfile"
)

// DefaultName sorts before other configurations in /etc/cni/net.d, which
// is how the runtime picks the network to use.
const DefaultName = "10-vpcnet.conflist"

// Options describe the node's network configuration list.
type Options struct {
	// NetworkName is the CNI network name, part of every attachment key.
	NetworkName string
	// Socket is the agent's unix socket the plugin dials.
	Socket string
	// PortMap chains the reference portmap plugin for hostPort support.
	PortMap bool
	// Bandwidth chains the reference bandwidth plugin for traffic shaping.
	Bandwidth bool
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
}

// Render returns the conflist document for opts.
func Render(opts Options) ([]byte, error) {
	if opts.NetworkName == "" {
		return nil, fmt.Errorf("render CNI config: network name is empty")
	}
	if opts.Socket == "" {
		return nil, fmt.Errorf("render CNI config: agent socket path is empty")
	}
	plugins := []any{PluginConf{Type: "vpcnet", Socket: opts.Socket}}
	if opts.PortMap {
		plugins = append(plugins, map[string]any{
			"type":         "portmap",
			"capabilities": map[string]bool{"portMappings": true},
			"snat":         true,
			// vpcnet's own rules are nftables; hostPort rules follow,
			// and the node needs no iptables binary.
			"backend": "nftables",
		})
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
