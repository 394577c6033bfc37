package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/internal/pluginlog"
	"github.com/vpcnet/vpcnet/netfacts"
)

const (
	defaultSocket  = "/run/vpcnet/vpcnetd.sock"
	defaultTimeout = 30 * time.Second
	// kernelTimeout bounds the plugin's own work on the node's kernel
	// (the veth, addresses, routes and rules of a pod). It is not the
	// agent's timeout: on a node making a hundred sandboxes at once on
	// two busy cores, a pod's wiring took more than 30 s (make
	// bench-awsnode: 20 of 100 pods failed with "wire pod: context
	// deadline exceeded"). Failing then throws the wiring away and makes
	// the kubelet retry the sandbox after its backoff; the Amazon VPC
	// CNI's plugin, with no such bound, just finishes. The kubelet gives
	// a sandbox's creation its runtime request timeout (2 minutes by
	// default, doubled for sandboxes), and the runtime ends the plugin
	// with it.
	kernelTimeout = 4 * time.Minute
	// maxStdin bounds the network configuration. A real one, prevResult
	// included, is a few kilobytes; GC's list of valid attachments on a
	// node at its pod limit is tens. Anything near a megabyte is a runtime
	// bug or an attack, and reading it whole costs the node its memory.
	maxStdin = 1 << 20
)

// netConf is the plugin's entry of the conflist: the fields every CNI
// plugin reads, and vpcnet's own, parsed with the struct the agent renders
// the conflist from so the two cannot drift apart.
type netConf struct {
	types.NetConf
	plugin  cniconf.PluginConf
	timeout time.Duration
}

// parseConf reads stdin. Errors are CNI errors naming the field at fault.
func parseConf(stdin []byte) (*netConf, error) {
	if len(stdin) > maxStdin {
		return nil, stdinTooLong()
	}
	var c netConf
	if err := json.Unmarshal(stdin, &c.NetConf); err != nil {
		return nil, configError(err)
	}
	if err := json.Unmarshal(stdin, &c.plugin); err != nil {
		return nil, configError(err)
	}
	if err := netfacts.ValidateNetworkName(c.Name); err != nil {
		return nil, invalidConf("field name: " + err.Error())
	}
	if c.plugin.Socket == "" {
		c.plugin.Socket = defaultSocket
	}
	if c.plugin.VethPrefix == "" {
		c.plugin.VethPrefix = netfacts.DefaultVethPrefix
	}
	if err := dataplane.ValidateVethPrefix(c.plugin.VethPrefix); err != nil {
		return nil, invalidConf("field vethPrefix: " + err.Error())
	}
	c.timeout = defaultTimeout
	if c.plugin.Timeout != "" {
		d, err := time.ParseDuration(c.plugin.Timeout)
		if err != nil || d <= 0 {
			return nil, invalidConf(fmt.Sprintf("field timeout: %q is not a positive duration such as \"30s\"", c.plugin.Timeout))
		}
		c.timeout = d
	}
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.NetConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "field prevResult: "+err.Error(), "")
		}
	}
	return &c, nil
}

// configError explains why stdin is not a valid configuration, naming the
// field when JSON can tell.
func configError(err error) *types.Error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return types.NewError(types.ErrDecodingFailure,
			fmt.Sprintf("field %s: a JSON %s cannot be a %s", typeErr.Field, typeErr.Value, typeErr.Type), "")
	case errors.As(err, &syntaxErr):
		return types.NewError(types.ErrDecodingFailure,
			fmt.Sprintf("network configuration is not valid JSON (at byte %d): %v", syntaxErr.Offset, err), "")
	}
	return types.NewError(types.ErrDecodingFailure, "network configuration: "+err.Error(), "")
}

// stdinTooLong is the error for a configuration over maxStdin.
func stdinTooLong() *types.Error {
	return invalidConf(fmt.Sprintf("network configuration on stdin is longer than %d bytes (1 MiB), the most vpcnet reads", maxStdin))
}

func invalidConf(msg string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, msg, "")
}

// podArgs are the CNI_ARGS Kubernetes runtimes pass.
type podArgs struct {
	namespace, name string
}

// parseArgs reads CNI_ARGS ("K=V;K=V"); keys other than the pod's
// namespace and name are ignored, as IgnoreUnknown=1 asks.
func parseArgs(s string) (podArgs, error) {
	var p podArgs
	if s == "" {
		return p, nil
	}
	for _, pair := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return p, types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("CNI_ARGS: %q is not a KEY=VALUE pair", pair), "")
		}
		switch k {
		case "K8S_POD_NAMESPACE":
			p.namespace = v
		case "K8S_POD_NAME":
			p.name = v
		}
	}
	return p, nil
}

// requirePod insists on the pod's identity, which names its host veth and
// is recorded by the agent, and on its following Kubernetes' rules.
func (p podArgs) requirePod() error {
	var missing []string
	if p.namespace == "" {
		missing = append(missing, "K8S_POD_NAMESPACE")
	}
	if p.name == "" {
		missing = append(missing, "K8S_POD_NAME")
	}
	if len(missing) > 0 {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_ARGS lacks %s: vpcnet names the pod's host veth after the pod, so it must run under a Kubernetes runtime that passes them",
				strings.Join(missing, " and ")), "")
	}
	if err := netfacts.ValidatePod(p.namespace, p.name); err != nil {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_ARGS: "+err.Error(), "")
	}
	return nil
}

// validAttachment checks the key the agent records the address under:
// CNI_CONTAINERID, CNI_IFNAME and the network name.
func (c *netConf) validAttachment(args *skel.CmdArgs) error {
	if err := netfacts.ValidateAttachment(c.Name, args.ContainerID, args.IfName); err != nil {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "attachment: "+err.Error(), "")
	}
	return nil
}

// hostVeth is the pod's host veth name, or "" when the pod is unknown or
// its names break Kubernetes' rules: no ADD wired such a pod.
func (c *netConf) hostVeth(p podArgs) string {
	if netfacts.ValidatePod(p.namespace, p.name) != nil {
		return ""
	}
	return netfacts.HostVethName(c.plugin.VethPrefix, p.namespace, p.name)
}

// logger writes to pluginLogFile when set, else warnings and errors to
// stderr, which the runtime logs.
func (c *netConf) logger() (*slog.Logger, func()) {
	return pluginlog.Open(c.plugin.LogFile, slog.LevelInfo)
}
