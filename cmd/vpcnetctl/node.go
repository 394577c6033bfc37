package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

// The node commands read the agent's introspection endpoint and print
// what it says: tables for people, the agent's own JSON with -o json (so
// fields a newer agent adds pass through unchanged).

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af agentFlags
	f := newCmdFlags("status", "[--agent ADDR] [-o table|json]",
		"The agent's readiness conditions, address counts, planned change, last EC2 error,\n"+
			"held growth, quarantined addresses and stale checkpoint entries.\n\n"+exitCodesHelp)
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
	body, err := af.client().Get(ctx, "/v1/status")
	if err != nil {
		return err
	}
	var st introspect.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("decode /v1/status from %s: %w (is --agent the introspection address, not metrics?)", af.client().URL(), err)
	}
	if af.output == "json" {
		err = writeIndented(stdout, body)
	} else {
		err = writeStatus(stdout, st, time.Now())
	}
	if err != nil {
		return err
	}
	if !st.Ready {
		return fmt.Errorf("%w: %s", errNotReady, notReadyReason(st))
	}
	return nil
}

// notReadyReason names the failing readiness conditions.
func notReadyReason(st introspect.Status) string {
	var failing []string
	for _, c := range st.Conditions {
		if !c.OK {
			failing = append(failing, c.Name)
		}
	}
	if len(failing) == 0 {
		return "no condition says why"
	}
	return "failing: " + strings.Join(failing, ", ")
}

func runENIs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runList(ctx, args, stdout, "enis", "/v1/enis", "The node's ENIs: subnet, route table and address counts per ENI.",
		func(w io.Writer, body []byte) error {
			var enis []introspect.ENI
			if err := json.Unmarshal(body, &enis); err != nil {
				return err
			}
			return writeENIs(w, enis)
		})
}

func runPods(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runList(ctx, args, stdout, "pods", "/v1/pods", "Which pod (container and interface) holds which address.",
		func(w io.Writer, body []byte) error {
			var holds []introspect.Hold
			if err := json.Unmarshal(body, &holds); err != nil {
				return err
			}
			return writeHolds(w, holds, time.Now())
		})
}

func runConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runList(ctx, args, stdout, "config", "/v1/config", "The agent's settings as it runs with them, and their defaults.",
		func(w io.Writer, body []byte) error {
			var settings []introspect.Setting
			if err := json.Unmarshal(body, &settings); err != nil {
				return err
			}
			return writeSettings(w, settings)
		})
}

// runList is a command that prints one endpoint.
func runList(ctx context.Context, args []string, stdout io.Writer, name, path, about string, table func(io.Writer, []byte) error) error {
	var af agentFlags
	f := newCmdFlags(name, "[--agent ADDR] [-o table|json]", about+"\n\n"+exitCodesHelp)
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
	body, err := af.client().Get(ctx, path)
	if err != nil {
		return err
	}
	if af.output == "json" {
		return writeIndented(stdout, body)
	}
	if err := table(stdout, body); err != nil {
		return fmt.Errorf("decode %s from %s: %w", path, af.client().URL(), err)
	}
	return nil
}

func writeIndented(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		return fmt.Errorf("the agent's answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// ago is a time as people read it next to now.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + (-d).Round(time.Second).String()
	}
	return d.Round(time.Second).String() + " ago"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
