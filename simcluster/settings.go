package simcluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vpcnet/vpcnet/config"
)

// ownSettings are what the local cloud gives each agent itself (agentEnv):
// where the node's files live, where the EC2 API and the agent's
// endpoints answer, and the credentials of the instance's role. The
// cluster's commands, its pods and doctor find a node's agent by them, so
// they are not the operator's to change; DISABLE_INTROSPECTION would hide
// every agent's readiness from the cluster too.
var ownSettings = []string{
	"PATH", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "VPCNET_EC2_ENDPOINT",
	"VPCNET_SOCKET", "VPCNET_STATE_DIR", "VPCNET_CNI_CONF_DIR", "VPCNET_CNI_BIN_DIR",
	"VPCNET_AWS_VPC_CNI_CHECKPOINT", "VPCNET_EGRESS_V4_IPAM_DIR", "INTROSPECTION_BIND_ADDRESS", "DISABLE_INTROSPECTION",
}

// CheckAgentEnv checks settings meant for the agents (Options.AgentEnv,
// NAME=VALUE each) before anything starts: each must be NAME=VALUE and
// not one the local cloud sets itself, and together with those they must
// pass the agent's own settings parser, as a node's vpcnetd would read
// them. The error names every bad setting and what is allowed.
func CheckAgentEnv(env []string) error {
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("agent setting %q: want NAME=VALUE, such as WARM_IP_TARGET=5", kv)
		}
		if slices.Contains(ownSettings, name) {
			return fmt.Errorf("agent setting %s: the local cloud sets it for each node itself (%s), so it cannot be given", name, strings.Join(ownSettings, ", "))
		}
	}
	n := &Node{NodeState: NodeState{ID: "i-check", Dir: "/nonexistent/i-check"},
		cluster: &Cluster{state: State{BinDir: "/nonexistent/bin"}}, env: env}
	_, err := config.LoadEnviron(n.agentEnv())
	return err // config's error names each setting and what is allowed
}

// AgentSettingNames are the names of the agent's settings (those vpcnetd
// reads, and the Amazon VPC CNI's it refuses) that the local cloud does
// not set itself: the ones an operator may mean for the agents.
func AgentSettingNames() []string {
	c, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		panic("simcluster: the agent's default settings do not load: " + err.Error())
	}
	var names []string
	for _, s := range c.Settings() {
		names = append(names, s.Name)
	}
	for _, r := range config.Refusals() {
		names = append(names, r.Name)
	}
	return slices.DeleteFunc(names, func(n string) bool { return slices.Contains(ownSettings, n) })
}
