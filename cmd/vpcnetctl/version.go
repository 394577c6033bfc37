package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/vpcnet/vpcnet/version"
)

// versionReport is `vpcnetctl version -o json`.
type versionReport struct {
	Client version.Info `json:"client"`
	// Agent is the agent's version and commit from /v1/status; nil with
	// AgentError when the agent did not answer.
	Agent      *agentVersion `json:"agent,omitempty"`
	AgentError string        `json:"agentError,omitempty"`
	// Match says the agent runs the same build as this binary.
	Match bool `json:"match"`
}

type agentVersion struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
}

// runVersion prints this binary's build and, when the agent answers, the
// agent's and whether they are the same build. An agent that does not
// answer is reported, not an error: the binary's own version is the answer
// asked for.
func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af agentFlags
	f := newCmdFlags("version", "[--agent ADDR] [-o table|json]",
		"This binary's version and commit, the agent's (from /v1/status) when it answers, and\n"+
			"whether they are one build. Exits 0 whether or not the agent answers.")
	af.register(f)
	pos, err := f.parse(args, stdout)
	if err != nil {
		return err
	}
	if err := noArgs(f, pos); err != nil {
		return err
	}
	if err := af.check(); err != nil {
		return err
	}
	rep := versionReport{Client: version.Get()}
	if st, err := af.client().Status(ctx); err != nil {
		rep.AgentError = err.Error()
	} else {
		rep.Agent = &agentVersion{Version: st.Version, Commit: st.Commit}
		rep.Match = sameBuild(rep.Client, *rep.Agent)
	}
	if af.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "vpcnetctl %s\n", rep.Client)
	switch {
	case rep.Agent == nil:
		fmt.Fprintf(stdout, "vpcnetd   unknown: %s\n", rep.AgentError)
	case rep.Match:
		fmt.Fprintf(stdout, "vpcnetd   %s (same build)\n", joinVersion(rep.Agent.Version, rep.Agent.Commit))
	default:
		fmt.Fprintf(stdout, "vpcnetd   %s: NOT the same build as this vpcnetctl\n", joinVersion(rep.Agent.Version, rep.Agent.Commit))
	}
	return nil
}

func sameBuild(c version.Info, a agentVersion) bool {
	return c.Version == a.Version && c.Commit == a.Commit
}

func joinVersion(v, commit string) string {
	if commit == "" {
		return v
	}
	return v + " commit " + commit
}
