package bundle

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	// Checkpoint is the agent's checkpoint file.
	Checkpoint string
	// CNIConfDir and CNIBinDir are the runtime's CNI directories.
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
	if o.Checkpoint == "" {
		o.Checkpoint = DefaultCheckpoint
	}
	if o.CNIConfDir == "" {
		o.CNIConfDir = DefaultCNIConfDir
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = DefaultCNIBinDir
	}
	if o.Run == nil {
		o.Run = RunCommand
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
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
	steps := []func(context.Context, *Archive, Options) error{
		addVersions, addAgent, addMetrics, addLogs, addCheckpoint, addHost, addCNI, addDoctor,
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
