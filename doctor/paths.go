package doctor

import (
	"context"
	"fmt"
	"path/filepath"
)

// Paths are where doctor reads this node's files and endpoints. The agent
// may be told to keep its files elsewhere than the DaemonSet's defaults
// (the local cloud gives every node its own directories), and it reports
// its settings on /v1/config: doctor looks where the agent says, unless
// the operator says otherwise with a flag.
type Paths struct {
	StateDir string
	// Checkpoint is the agent's checkpoint file; "" means
	// STATE_DIR/checkpoint.json.
	Checkpoint        string
	CNIConfDir        string
	CNIBinDir         string
	AWSNodeCheckpoint string
	IMDSEndpoint      string
	// EC2Endpoint "" means the Region's.
	EC2Endpoint string
	// VethPrefix names the agent's host veths; doctor has no flag for it.
	VethPrefix string
}

// PathDifference is a place the operator told doctor to read that is not
// the one the agent reports using.
type PathDifference struct {
	Flag    string // doctor's flag, without dashes
	Setting string // the agent's setting
	Given   string
	Agent   string
}

// pathSetting ties one of Paths to doctor's flag, the agent's setting
// and the DaemonSet's default (config/settings.go).
type pathSetting struct {
	flag, setting, def string
	field              func(*Paths) *string
}

func pathSettings() []pathSetting {
	return []pathSetting{
		{"state-dir", "VPCNET_STATE_DIR", "/var/lib/vpcnet", func(p *Paths) *string { return &p.StateDir }},
		{"cni-conf-dir", "VPCNET_CNI_CONF_DIR", "/etc/cni/net.d", func(p *Paths) *string { return &p.CNIConfDir }},
		{"cni-bin-dir", "VPCNET_CNI_BIN_DIR", "/opt/cni/bin", func(p *Paths) *string { return &p.CNIBinDir }},
		{"aws-node-checkpoint", "VPCNET_AWS_VPC_CNI_CHECKPOINT", "/var/run/aws-node/ipam.json", func(p *Paths) *string { return &p.AWSNodeCheckpoint }},
		{"imds-endpoint", "VPCNET_IMDS_ENDPOINT", DefaultIMDSEndpoint, func(p *Paths) *string { return &p.IMDSEndpoint }},
		{"ec2-endpoint", "VPCNET_EC2_ENDPOINT", "", func(p *Paths) *string { return &p.EC2Endpoint }},
		{"", "AWS_VPC_K8S_CNI_VETHPREFIX", "eni", func(p *Paths) *string { return &p.VethPrefix }},
	}
}

// PathFlagDefault is what doctor's flag for setting says in its help:
// the agent's value, else the default.
func PathFlagDefault(setting string) string {
	for _, s := range pathSettings() {
		if s.setting == setting {
			if s.def == "" {
				return fmt.Sprintf("default: the agent's %s, else the Region's", setting)
			}
			return fmt.Sprintf("default: the agent's %s, else %s", setting, s.def)
		}
	}
	panic("doctor: no path setting " + setting)
}

// AgentSettings reads the agent's settings by name; nil when it does not
// answer (Gather then reports why).
func AgentSettings(ctx context.Context, a Agent) map[string]string {
	set, err := a.Config(ctx)
	if err != nil {
		return nil
	}
	out := make(map[string]string, len(set))
	for _, s := range set {
		out[s.Name] = s.Value
	}
	return out
}

// Resolve fills each place given leaves empty with the agent's setting
// (agent is nil when the agent could not be asked), else the default. A
// place given that differs from the agent's is kept, and returned as a
// difference: the operator may know better (a container whose volumes
// mount host paths elsewhere), but doctor says so.
func (given Paths) Resolve(agent map[string]string) (Paths, []PathDifference) {
	out := given
	var diffs []PathDifference
	agentValue := func(s pathSetting) (string, bool) {
		v, ok := agent[s.setting]
		if ok && v == "" {
			v = s.def // an empty setting is the agent's default too
		}
		return v, ok
	}
	for _, s := range pathSettings() {
		p := s.field(&out)
		av, known := agentValue(s)
		switch {
		case *p != "":
			if known && !samePlace(*p, av) {
				diffs = append(diffs, PathDifference{Flag: s.flag, Setting: s.setting, Given: *p, Agent: av})
			}
		case known:
			*p = av
		default:
			*p = s.def
		}
	}
	agentCheckpoint := ""
	if dir, ok := agent["VPCNET_STATE_DIR"]; ok && dir != "" {
		agentCheckpoint = filepath.Join(dir, "checkpoint.json")
	}
	if out.Checkpoint == "" {
		out.Checkpoint = filepath.Join(out.StateDir, "checkpoint.json")
	} else if agentCheckpoint != "" && given.StateDir == "" && !samePlace(out.Checkpoint, agentCheckpoint) {
		diffs = append(diffs, PathDifference{Flag: "checkpoint", Setting: "VPCNET_STATE_DIR", Given: out.Checkpoint, Agent: agentCheckpoint})
	}
	return out, diffs
}

// samePlace compares two paths or URLs as written, ignoring a trailing
// slash and . parts.
func samePlace(a, b string) bool {
	if a == b {
		return true
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// pathFindings: what doctor read elsewhere than the agent says it keeps
// it. Its other findings are then about the places it was told, which an
// operator reading them must know.
func pathFindings(f Facts) []Finding {
	if len(f.PathDifferences) == 0 {
		return nil
	}
	var ev []string
	for _, d := range f.PathDifferences {
		ev = append(ev, fmt.Sprintf("--%s %s, but the agent's %s is %s", d.Flag, orDash(d.Given), d.Setting, orDash(d.Agent)))
	}
	return []Finding{{
		ID: "paths-differ-from-agent", Severity: Warning,
		What:     "doctor read where its flags said, not where the agent reports keeping its files and endpoints (/v1/config): what it says of those places may not be what the agent uses",
		Evidence: ev,
		Fix:      "none if the agent runs in a container whose volumes put these host paths at its own; otherwise drop the flags, and doctor reads the agent's own",
	}}
}
