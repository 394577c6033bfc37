// Command vpcnet-install is the vpcnet DaemonSet's init container: it copies
// the vpcnet CNI plugin from the image into the node's CNI binary directory,
// mounted from the host.
//
//	vpcnet-install [-from DIR] [-to DIR] [-require NAME,...] [PLUGIN...]
//
// Each PLUGIN (default: vpcnet) replaces the node's copy. Each -require name
// must be in -to afterwards: the node's own copy is kept, one from -from is
// installed only if the node has none, and if neither has it the command
// fails naming it, because the CNI configuration the agent writes chains
// those plugins and every pod on the node would fail without them.
//
// Every copy is atomic (a temporary file in the target directory, fsync,
// rename, fsync of the directory): the container runtime may exec a plugin
// at any instant and must never find a half-written binary, and a crash
// leaves the old binary or the new one.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("vpcnet-install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "directory holding the plugins to install (default: this program's own directory)")
	to := fs.String("to", "/host/opt/cni/bin", "the node's CNI binary directory, as mounted in this container")
	require := fs.String("require", "", "comma-separated plugins that must be in -to afterwards; the node's own copies are kept")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *from == "" {
		dir, err := ownDir()
		if err != nil {
			fmt.Fprintln(stderr, "vpcnet-install:", err)
			return 1
		}
		*from = dir
	}
	plugins := fs.Args()
	if len(plugins) == 0 {
		plugins = []string{"vpcnet"}
	}
	in := installer{from: *from, to: *to, log: stderr}
	for _, name := range plugins {
		if err := in.replace(name); err != nil {
			fmt.Fprintln(stderr, "vpcnet-install:", err)
			return 1
		}
	}
	for name := range strings.SplitSeq(*require, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if err := in.ensure(name); err != nil {
			fmt.Fprintln(stderr, "vpcnet-install:", err)
			return 1
		}
	}
	return 0
}

// ownDir is the directory of this executable: the image keeps the plugins
// beside the installer (/usr/local/bin from the Dockerfile, /ko-app from ko).
func ownDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own directory (pass -from): %w", err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("find own directory (pass -from): %w", err)
	}
	return filepath.Dir(exe), nil
}
