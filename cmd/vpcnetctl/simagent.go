package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/simcluster"
)

// The background `sim run` process owns the agents: it started them
// inside their namespaces, it reaps them, they die with it (Pdeathsig),
// and only it holds each agent's settings to start it again. So `sim
// agent` asks it, over HTTP on a unix socket in the state directory:
//
//   - a socket file needs no port, and ports are what two clusters side
//     by side would fight over; the file lives and dies with the state
//     directory, mode 0600 in a 0700 directory, so only its user may
//     stop an agent;
//   - a request gets an answer, so the command can say that the agent
//     stopped, or why it did not, which signals to the owner and marker
//     files could not without polling.
const controlSocket = "control.sock"

// agentStopGrace is how long `sim agent stop` waits after SIGTERM before
// it kills the agent: the kubelet's default termination grace period.
const agentStopGrace = 30 * time.Second

// serveControl serves the control socket until stop is called.
func serveControl(c *simcluster.Cluster, log *slog.Logger) (stop func(), err error) {
	path := filepath.Join(c.State().StateDir, controlSocket)
	// The caller holds the state directory's lock: a socket file here is
	// a killed run's.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the stale control socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/{node}/{action}", func(w http.ResponseWriter, r *http.Request) {
		msg, code := controlAgent(c, r.PathValue("node"), r.PathValue("action"))
		log.Info("control", "node", r.PathValue("node"), "action", r.PathValue("action"), "result", msg)
		w.WriteHeader(code)
		fmt.Fprintln(w, msg)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return func() {
		srv.Close()
		os.Remove(path)
	}, nil
}

// controlAgent performs one action on a node's agent and says what
// happened, with the HTTP status for it.
func controlAgent(c *simcluster.Cluster, node, action string) (string, int) {
	n, err := c.Node(node)
	if err != nil {
		return err.Error(), http.StatusNotFound
	}
	state := c.State().StateDir
	pid := n.AgentPID()
	switch action {
	case "stop", "kill":
		if pid == 0 {
			return fmt.Sprintf("the agent on %s is not running; start it with `%s`", node, simCmd(state, "agent", "start", node)), http.StatusConflict
		}
		if action == "kill" {
			err = n.KillAgent()
		} else {
			err = n.StopAgent(agentStopGrace)
		}
		if err != nil {
			return err.Error(), http.StatusInternalServerError
		}
		how := "stopped (SIGTERM)"
		if action == "kill" {
			how = "killed (SIGKILL)"
		}
		return fmt.Sprintf("the agent on %s (pid %d) %s; start it again with `%s`", node, pid, how, simCmd(state, "agent", "start", node)), http.StatusOK
	case "start":
		if pid != 0 {
			return fmt.Sprintf("the agent on %s is running already (pid %d)", node, pid), http.StatusConflict
		}
		if err := n.StartAgent(); err != nil {
			return err.Error(), http.StatusInternalServerError
		}
		return fmt.Sprintf("the agent on %s started (pid %d, log %s); `%s` shows when it is ready", node, n.AgentPID(), n.AgentLog(), simCmd(state, "status")), http.StatusOK
	}
	return fmt.Sprintf("unknown action %q: want stop, start or kill", action), http.StatusBadRequest
}

// simAgent stops, kills or starts one node's vpcnetd, as the kubelet or
// the OOM killer would, through the running cluster's control socket.
func simAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "stop|start|kill NODE [--state DIR]\n\n" +
		"  stop   SIGTERM, and wait for the agent to finish (SIGKILL after 30s), as the kubelet stops a pod\n" +
		"  kill   SIGKILL, as a crash or the OOM killer would\n" +
		"  start  start the agent again with the settings it had"
	fs := simFlags("agent", synopsis, stderr)
	state := fs.String("state", defaultStateDir, "directory of the cluster's state")
	if wantHelp(args) {
		fs.Usage()
		return flag.ErrHelp
	}
	pos, err := parseSimFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[0] != "stop" && pos[0] != "start" && pos[0] != "kill") {
		return fmt.Errorf("%w: want \"vpcnetctl sim agent stop|start|kill NODE\" (see `vpcnetctl sim agent --help`)", errUsage)
	}
	action, node := pos[0], pos[1]
	dir, err := absState(*state)
	if err != nil {
		return err
	}
	if _, held, _ := simcluster.LockHolder(dir); !held {
		return fmt.Errorf("no local cloud is running with state in %s: start one with `%s`", dir, simCmd(dir, "up"))
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(dir, controlSocket))
		},
	}}
	ctx, cancel := context.WithTimeout(ctx, agentStopGrace+15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sim/v1/agents/"+node+"/"+action, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("ask the local cloud to %s the agent on %s (control socket %s): %w", action, node, filepath.Join(dir, controlSocket), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return errors.New(msg)
	}
	fmt.Fprintln(stdout, msg)
	return nil
}
