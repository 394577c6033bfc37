package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/containernetworking/cni/libcni"
)

// CNIReader reads the CNI configuration directory and runs CNI STATUS on
// vpcnet's configuration with libcni, as containerd does.
type CNIReader struct {
	ConfDir string
	BinDir  string
}

var _ CNI = CNIReader{}

// pluginType is vpcnet's plugin's type in a configuration list.
const pluginType = "vpcnet"

// CNI implements CNI.
func (r CNIReader) CNI(ctx context.Context) (CNIFacts, error) {
	c := CNIFacts{ConfDir: r.ConfDir, BinDir: r.BinDir}
	files, err := libcni.ConfFiles(r.ConfDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return c, fmt.Errorf("CNI configuration directory: %w", err)
	}
	slices.Sort(files) // the runtime takes the first in this order
	var ours *libcni.NetworkConfigList
	for _, path := range files {
		c.Files = append(c.Files, filepath.Base(path))
		list, err := libcni.NetworkConfFromFile(path)
		if err != nil {
			continue // someone else's file; the runtime skips it too
		}
		if c.Ours == "" && slices.ContainsFunc(list.Plugins, func(p *libcni.PluginConfig) bool { return p.Network.Type == pluginType }) {
			c.Ours, ours = filepath.Base(path), list
		}
	}
	if ours == nil {
		if _, err := os.Stat(filepath.Join(r.BinDir, pluginType)); err != nil {
			c.MissingPlugins = append(c.MissingPlugins, pluginType)
		}
		return c, nil
	}
	for _, p := range ours.Plugins {
		c.Plugins = append(c.Plugins, p.Network.Type)
		if _, err := os.Stat(filepath.Join(r.BinDir, p.Network.Type)); err != nil {
			c.MissingPlugins = append(c.MissingPlugins, p.Network.Type)
		}
	}
	if len(c.MissingPlugins) > 0 {
		return c, nil
	}
	cc := libcni.NewCNIConfig([]string{r.BinDir}, nil)
	c.StatusRan = true
	if err := cc.GetStatusNetworkList(ctx, ours); err != nil {
		c.StatusErr = err.Error()
	}
	return c, nil
}
