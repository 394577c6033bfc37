package simcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
)

// introspection is where each agent serves /readyz and /v1 inside its
// node's namespace: vpcnetd's default.
const introspection = "127.0.0.1:61679"

// Node is one instance and its agent.
type Node struct {
	NodeState
	cluster *Cluster
	env     []string

	// mu guards the agent process.
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how the last agent process ended
}

// Paths inside the node's directory, one set per node, so agents share the
// filesystem without sharing state.
func (n *Node) socket() string      { return filepath.Join(n.Dir, "run", "vpcnetd.sock") }
func (n *Node) confDir() string     { return filepath.Join(n.Dir, "net.d") }
func (n *Node) AgentLog() string    { return filepath.Join(n.Dir, "vpcnetd.log") }
func (n *Node) cniCacheDir() string { return filepath.Join(n.Dir, "cni-cache") }

// agentEnv is vpcnetd's environment: production defaults, except where the
// node's state lives and where the EC2 API answers.
func (n *Node) agentEnv() []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		// The instance ID as access key: the local cloud applies the
		// instance's role (its topology's roles) to the agent's calls.
		"AWS_ACCESS_KEY_ID=" + n.ID, "AWS_SECRET_ACCESS_KEY=sim",
		"VPCNET_EC2_ENDPOINT=http://" + fabric.EC2Address,
		"CLUSTER_NAME=vpcnet-sim",
		"VPCNET_SOCKET=" + n.socket(),
		"VPCNET_STATE_DIR=" + filepath.Join(n.Dir, "lib"),
		"VPCNET_CNI_CONF_DIR=" + n.confDir(),
		// The plugins are where the local cloud's runtime (pod.go's
		// libcni) finds them; the agent reports it for doctor.
		"VPCNET_CNI_BIN_DIR=" + n.cluster.state.BinDir,
		"VPCNET_AWS_VPC_CNI_CHECKPOINT=" + filepath.Join(n.Dir, "aws-node", "ipam.json"),
		// Every node's IPv6 pods' IPv4 egress addresses in its own
		// directory, as on separate machines, not the test host's /run.
		"VPCNET_EGRESS_V4_IPAM_DIR=" + filepath.Join(n.Dir, "egress-v4-ipam"),
		"INTROSPECTION_BIND_ADDRESS=" + introspection,
	}
	return append(env, n.env...)
}

// resetAgentState removes what an agent of an earlier cluster in the same
// state directory kept: a new cluster is a new cloud, and a checkpoint
// that says which pod holds which address of ENIs that no longer exist
// would be restored as if it were true (the new cloud hands the same
// addresses out again). The agent's log stays, and goes on.
func (n *Node) resetAgentState() error {
	for _, d := range []string{"lib", "net.d", "run", "cni-cache", "aws-node", "egress-v4-ipam"} {
		if err := os.RemoveAll(filepath.Join(n.Dir, d)); err != nil {
			return fmt.Errorf("node %s: remove the state an earlier cluster left: %w", n.ID, err)
		}
	}
	return nil
}

// StartAgent runs vpcnetd inside the node's namespace; its log goes to
// AgentLog. The agent is killed if this process dies.
func (n *Node) StartAgent() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("node %s: agent already running (pid %d)", n.ID, n.cmd.Process.Pid)
	}
	// The state directory is created as the DaemonSet's hostPath volume
	// (DirectoryOrCreate) is; the agent refuses to create it, so that a
	// missing mount cannot silently put the checkpoint on ephemeral disk.
	if err := os.MkdirAll(filepath.Join(n.Dir, "lib"), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.AgentLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(n.cluster.state.BinDir, "vpcnetd"))
	cmd.Env = n.agentEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = fabric.Do(n.NetNS, cmd.Start)
	logf.Close() // the child has its own copy
	if err != nil {
		return fmt.Errorf("node %s: start vpcnetd: %w", n.ID, err)
	}
	pidFile := filepath.Join(n.Dir, agentPIDFile)
	if err := writeProcRecord(pidFile, cmd.Process.Pid); err != nil {
		// Without the record a killed owner could leave this agent
		// behind unnoticed; refuse rather than run it unrecorded.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("node %s: %w", n.ID, err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		err := cmd.Wait()
		os.Remove(pidFile)
		n.mu.Lock()
		n.err = err
		if n.cmd == cmd {
			n.cmd = nil
		}
		n.mu.Unlock()
		close(exited)
	}(cmd, n.exited)
	n.cluster.log.Info("agent started", "node", n.ID, "pid", cmd.Process.Pid, "log", n.AgentLog())
	return nil
}

// KillAgent kills vpcnetd with SIGKILL, as a crash or an OOM kill would,
// and waits for it to be gone.
func (n *Node) KillAgent() error { return n.signal(syscall.SIGKILL, 10*time.Second) }

// StopAgent asks vpcnetd to shut down with SIGTERM, as the kubelet does,
// and kills it if it has not exited within grace.
func (n *Node) StopAgent(grace time.Duration) error {
	err := n.signal(syscall.SIGTERM, grace)
	if errors.Is(err, context.DeadlineExceeded) {
		return n.KillAgent()
	}
	return err
}

func (n *Node) signal(sig syscall.Signal, wait time.Duration) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("node %s: signal vpcnetd: %w", n.ID, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("node %s: vpcnetd did not exit %s after %s: %w", n.ID, wait, sig, context.DeadlineExceeded)
	}
}

// WaitReady polls the agent's /readyz until it answers 200. If the agent
// exits first, the error carries the end of its log.
func (n *Node) WaitReady(ctx context.Context) error {
	for {
		n.mu.Lock()
		exited := n.exited
		n.mu.Unlock()
		// Ready for the kubelet is the agent ready and its CNI
		// configuration written.
		body, code, err := n.get(ctx, "/readyz")
		if err == nil && code == http.StatusOK {
			if _, _, cerr := n.cni(); cerr == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: agent not ready (last answer %d %s, err %v): %w\n%s", n.ID, code, strings.TrimSpace(string(body)), err, ctx.Err(), n.logTail(20))
		case <-exited:
			return fmt.Errorf("node %s: vpcnetd exited before it was ready: %v\n%s", n.ID, n.err, n.logTail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Get fetches one of the agent's introspection endpoints, such as
// /v1/enis.
func (n *Node) Get(ctx context.Context, path string) ([]byte, error) {
	body, code, err := n.get(ctx, path)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return body, fmt.Errorf("node %s: GET %s: %d %s", n.ID, path, code, strings.TrimSpace(string(body)))
	}
	return body, nil
}

func (n *Node) get(ctx context.Context, path string) ([]byte, int, error) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return fabric.Dial(ctx, n.NetNS, network, addr)
		},
		DisableKeepAlives: true,
	}, Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+introspection+path, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// logTail is the end of the agent's log, for error messages.
func (n *Node) logTail(lines int) string {
	data, err := os.ReadFile(n.AgentLog())
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
