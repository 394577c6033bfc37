package bundle

import (
	"net"
	"testing"

	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/introspect"
)

// The bundle looks where an agent with default settings keeps things: if
// a default changes in config, this fails rather than the bundle quietly
// looking in the old place.
func TestTheBundleDefaultsAreTheAgentsDefaults(t *testing.T) {
	cfg, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(cfg.MetricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, bundle, agent string }{
		{"metrics address (on loopback)", DefaultMetrics, "127.0.0.1:" + port},
		{"introspection address", introspect.DefaultAddr, cfg.IntrospectionAddr},
		{"checkpoint", DefaultCheckpoint, cfg.CheckpointPath()},
		{"CNI configuration directory", DefaultCNIConfDir, cfg.CNIConfDir},
		{"CNI plugin directory", DefaultCNIBinDir, cfg.CNIBinDir},
	} {
		if c.bundle != c.agent {
			t.Errorf("%s: the bundle reads %s, the agent's default is %s", c.what, c.bundle, c.agent)
		}
	}
}
