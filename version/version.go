// Package version says which build of vpcnet is running. Every binary
// (vpcnetd, the plugin, vpcnetctl) and the agent's /v1/status report the
// same string, read from the Go build information, so a support case can
// tell whether the agent and the plugin on a node come from one build.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the main module's version: a release tag, a
	// pseudo-version, or "(devel)" for a build from a work tree.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, with
	// "-dirty" when the work tree had changes; empty when unknown
	// (go run, or a build outside a checkout).
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Get reads the running binary's build information.
func Get() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	info.Commit = rev
	return info
}

// String is the one-line form every binary prints for --version.
func (i Info) String() string {
	if i.Commit == "" {
		return fmt.Sprintf("%s (%s)", i.Version, i.GoVersion)
	}
	return fmt.Sprintf("%s commit %s (%s)", i.Version, i.Commit, i.GoVersion)
}
