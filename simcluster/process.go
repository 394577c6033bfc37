package simcluster

// ConfDir is where the node's agent writes its CNI configuration: the
// node's /etc/cni/net.d, for a driver that runs its own libcni.
func (n *Node) ConfDir() string { return n.confDir() }

// AgentPID is the process ID of the node's running vpcnetd, or 0 when
// none runs, so a benchmark can read its /proc entries.
func (n *Node) AgentPID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}
