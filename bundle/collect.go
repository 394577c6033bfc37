package bundle

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/version"
)

// Options say where a node keeps what the bundle collects. The zero
// value of each field means the DaemonSet's default.
type Options struct {
	// Agent is the introspection address (introspect.DefaultAddr).
	Agent string
	// Metrics is the metrics address, host:port (127.0.0.1:61678).
	Metrics string
	// AgentLogs are log files to tail; empty means the known places
	// (DefaultLogGlobs).
	AgentLogs []string
	// LogLimit is how much of the end of each log to keep.
	LogLimit int
	// Checkpoint is the agent's checkpoint file; empty means the one
	// the agent reports using (VPCNET_STATE_DIR on /v1/config), else
	// the DaemonSet's.
	Checkpoint string
	// CNIConfDir and CNIBinDir are the runtime's CNI directories; empty
	// means the agent's VPCNET_CNI_CONF_DIR and VPCNET_CNI_BIN_DIR, else
	// the DaemonSet's.
	CNIConfDir string
	CNIBinDir  string
	// Self is this vpcnetctl, run as `Self doctor -o json`; empty skips
	// doctor with the reason recorded.
	Self string
	// Run runs a command and returns its stdout and stderr; nil means
	// RunCommand.
	Run func(ctx context.Context, name string, args []string, env []string) (stdout, stderr []byte, err error)
	// HTTP is the client for the agent; nil means one with a 5 s timeout.
	HTTP *http.Client
}

// doctorFlags are the paths the caller named, passed to doctor so that
// it reads the same places as the bundle; doctor learns the others from
// the agent as the bundle did.
func (o *Options) doctorFlags() []string {
	var args []string
	for _, f := range []struct{ flag, value string }{
		{"--checkpoint", o.Checkpoint}, {"--cni-conf-dir", o.CNIConfDir}, {"--cni-bin-dir", o.CNIBinDir},
	} {
		if f.value != "" {
			args = append(args, f.flag, f.value)
		}
	}
	return args
}

// Defaults of Options, the DaemonSet's paths (config/settings.go).
const (
	DefaultMetrics    = "127.0.0.1:61678"
	DefaultCheckpoint = "/var/lib/vpcnet/checkpoint.json"
	DefaultCNIConfDir = "/etc/cni/net.d"
	DefaultCNIBinDir  = "/opt/cni/bin"
	DefaultLogLimit   = 8 << 20
)

// DefaultLogGlobs are where the agent's log lives on a node: the kubelet's
// container logs (current and previous container) of the DaemonSet's pod.
var DefaultLogGlobs = []string{
	"/var/log/pods/kube-system_vpcnet-*/vpcnet/*.log",
	"/var/log/vpcnet/*.log",
}

func (o *Options) fill() {
	if o.Agent == "" {
		o.Agent = introspect.DefaultAddr
	}
	if o.Metrics == "" {
		o.Metrics = DefaultMetrics
	}
	if o.LogLimit <= 0 {
		o.LogLimit = DefaultLogLimit
	}
	if o.Run == nil {
		o.Run = RunCommand
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
}

// fillPaths sets the paths the caller left empty to the agent's own, as
// it reports them on /v1/config, else to the DaemonSet's: an agent told
// to keep its files elsewhere (every node of the local cloud is) must
// not be bundled from someone else's.
func (o *Options) fillPaths(ctx context.Context) {
	agent := map[string]string{}
	if set, err := (&introspect.Client{Base: o.Agent, HTTP: o.HTTP}).Config(ctx); err == nil {
		for _, s := range set {
			agent[s.Name] = s.Value
		}
	}
	pick := func(p *string, fromAgent, def string) {
		switch {
		case *p != "":
		case fromAgent != "":
			*p = fromAgent
		default:
			*p = def
		}
	}
	var cp string
	if dir := agent["VPCNET_STATE_DIR"]; dir != "" {
		cp = filepath.Join(dir, "checkpoint.json")
	}
	pick(&o.Checkpoint, cp, DefaultCheckpoint)
	pick(&o.CNIConfDir, agent["VPCNET_CNI_CONF_DIR"], DefaultCNIConfDir)
	pick(&o.CNIBinDir, agent["VPCNET_CNI_BIN_DIR"], DefaultCNIBinDir)
}

// agentPaths are the introspection endpoints, each stored as agent/FILE.
var agentPaths = []struct{ path, file string }{
	{"/v1/status", "v1-status.json"},
	{"/v1/enis", "v1-enis.json"},
	{"/v1/pods", "v1-pods.json"},
	{"/v1/config", "v1-config.json"},
	{"/readyz", "readyz.json"},
	{"/healthz", "healthz.txt"},
}

// Collect adds every part to a. Only a failure to write the archive is
// an error; everything else is recorded in the MANIFEST.
func Collect(ctx context.Context, a *Archive, o Options) error {
	o.fill()
	told := o.doctorFlags()
	o.fillPaths(ctx)
	steps := []func(context.Context, *Archive, Options) error{
		addVersions, addAgent, addMetrics, addLogs, addCheckpoint, addHost, addCNI,
		func(ctx context.Context, a *Archive, o Options) error { return addDoctor(ctx, a, o, told) },
	}
	for _, step := range steps {
		if err := step(ctx, a, o); err != nil {
			return err
		}
	}
	return nil
}

func addVersions(_ context.Context, a *Archive, _ Options) error {
	b, err := json.MarshalIndent(map[string]version.Info{"vpcnetctl": version.Get()}, "", "  ")
	return a.Add("versions/vpcnetctl.json", b, err)
}

func addAgent(ctx context.Context, a *Archive, o Options) error {
	c := &introspect.Client{Base: o.Agent, HTTP: o.HTTP}
	for _, p := range agentPaths {
		body, err := c.Get(ctx, p.path)
		if err := a.Add("agent/"+p.file, body, err); err != nil {
			return err
		}
	}
	return nil
}

func addMetrics(ctx context.Context, a *Archive, o Options) error {
	base := o.Metrics
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	body, err := httpGet(ctx, o.HTTP, strings.TrimSuffix(base, "/")+"/metrics")
	return a.Add("agent/metrics.txt", body, err)
}

func httpGet(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w (is vpcnetd running? its metrics address is VPCNET_METRICS_BIND_ADDRESS)", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, DefaultPartLimit))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}
