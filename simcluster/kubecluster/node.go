package kubecluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// nodeSpec is what one node's runtime needs to start.
type nodeSpec struct {
	ID, Name, AZ string
	NetNS        string
	// IP is the address the kubelet registers and serves on: the
	// instance's primary IPv4 address, or its IPv6 one in an IPv6
	// cluster (family.go).
	IP       netip.Addr
	Dir      string // the node's own directory; everything it writes is below
	Cgroup   string // cgroup (relative to each hierarchy) of the whole node
	Taints   []string
	Labels   []string // KEY=VALUE, registered by the kubelet
	Identity Identity // the kubelet's client certificate
	CA       []byte
	// Resolver is the VPC's DNS resolver (the VPC's base address plus
	// two, AmazonProvidedDNS), the only name server in the node's
	// resolv.conf, as on EC2. Pods with dnsPolicy ClusterFirst use the
	// cluster's DNS instead (ClusterDNS).
	Resolver netip.Addr
	// ClusterDNS is the kube-dns Service's address, in the cluster's
	// family (family.go).
	ClusterDNS netip.Addr
	Bins       Binaries
}

// hostPaths are the host directories a node's kubelet, containerd and the
// vpcnet DaemonSet's hostPath volumes use: each is replaced, inside the
// node's private mount namespace, by a directory of the node's own, so two
// nodes on one machine share none of them and the machine's own paths are
// never written. /run/containerd also holds the shims' sockets and (with
// netns_mounts_under_state_dir) the pods' namespace files.
var hostPaths = []string{
	"/run/containerd", "/var/lib/containerd", "/var/lib/kubelet",
	"/var/log/pods", "/var/log/containers", "/etc/cni/net.d", "/opt/cni/bin",
	"/var/lib/cni", "/run/nri",
	// The vpcnet DaemonSet's hostPath volumes, and aws-node's.
	"/run/vpcnet", "/var/lib/vpcnet", "/run/aws-node", "/var/log/aws-routed-eni",
}

// hostFiles are host files a DaemonSet mounts (aws-node's xtables lock,
// FileOrCreate): each node gets its own, bound over the host's, as two
// machines do not share one lock. The host file is created empty if
// missing, as the kubelet would (only the bind target; nothing uses it).
var hostFiles = []string{"/run/xtables.lock"}

// hostSysctls are the host-wide (not per network namespace) settings the
// kubelet writes at start; each node gets a private file bound over them.
var hostSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func (s nodeSpec) root() string { return filepath.Join(s.Dir, "root") }
func (s nodeSpec) hostDir(p string) string {
	return filepath.Join(s.root(), strings.ReplaceAll(strings.Trim(p, "/"), "/", "_"))
}
func (s nodeSpec) socketOnHost() string {
	return filepath.Join(s.hostDir("/run/containerd"), "containerd.sock")
}

// nodeScript runs as the first process of the node's private mount and
// UTS namespaces (unshare --mount --uts --propagation private, started in
// the node's network namespace): it joins the node's cgroup, mounts the node's own
// directories over the host paths, a fresh sysfs for the node's network
// namespace, then runs containerd, the kubelet and kube-proxy and waits.
// Every process the node makes stays in its cgroup, which is how teardown
// finds them by PID.
var nodeScript = template.Must(template.New("node").Parse(`#!/bin/sh
set -eu
# The node's own host name, as on EC2 the instance's: its PrivateDnsName
# (or the custom name it registers under).
hostname {{.Name}}
for h in {{range .Hierarchies}}{{.}} {{end}}; do
	echo $$ > "$h{{.Cgroup}}/system/cgroup.procs"
done
{{range .Binds}}mkdir -p {{.Target}}
mount --bind {{.Source}} {{.Target}}
{{end}}{{range .FileBinds}}[ -e {{.Target}} ] || : > {{.Target}}
mount --bind {{.Source}} {{.Target}}
{{end}}
{{range .Sysctls}}cat /proc/sys/{{.Key}} > {{.File}}
mount --bind {{.File}} /proc/sys/{{.Key}}
{{end}}
# sysfs as the node's network namespace sees it (its own /sys/class/net),
# with the host's cgroup mounts carried over.
mkdir -p {{.Dir}}/cgroup-hold
mount --rbind /sys/fs/cgroup {{.Dir}}/cgroup-hold
mount -t sysfs sysfs /sys
mount --move {{.Dir}}/cgroup-hold /sys/fs/cgroup

# setpriv --pdeathsig: each daemon dies with this shell, which dies with
# the process running the cluster (Pdeathsig), however that one ends.
setpriv --pdeathsig KILL {{.Bins.Containerd}} --config {{.Dir}}/containerd.toml >>{{.Dir}}/logs/containerd.log 2>&1 &
echo $! > {{.Dir}}/containerd.pid
i=0
while [ ! -S /run/containerd/containerd.sock ]; do
	i=$((i+1))
	if [ $i -gt 600 ]; then echo "containerd did not create its socket in 60s" >&2; exit 1; fi
	sleep 0.1
done
setpriv --pdeathsig KILL {{.Bins.Kubelet}} --config={{.Dir}}/kubelet.yaml --kubeconfig={{.Dir}}/kubelet.kubeconfig \
	--hostname-override={{.Name}} --node-ip={{.IP}} \
	{{if .Taints}}--register-with-taints={{.TaintList}} {{end}}{{if .Labels}}--node-labels={{.LabelList}} {{end}}--v=2 >>{{.Dir}}/logs/kubelet.log 2>&1 &
echo $! > {{.Dir}}/kubelet.pid
wait
`))

var containerdConfig = template.Must(template.New("containerd").Parse(`version = 4
root = "/var/lib/containerd"
state = "/run/containerd"
# Not the host's /etc/containerd/conf.d.
imports = []
# opt writes /opt/containerd on the host; NRI listens on /run/nri; neither
# is used here.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[debug]
  level = "info"

[plugins."io.containerd.server.v1.grpc"]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{{.PauseImage}}"

[plugins."io.containerd.cri.v1.runtime"]
  # runc cannot write oom_score_adj without CAP_SYS_RESOURCE, which root
  # lacks on these machines: without this every sandbox fails with "can't
  # get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Pod network namespaces under /run/containerd, the node's own.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/opt/cni/bin"]
    conf_dir = "/etc/cni/net.d"
    # The pod's lo without the reference loopback plugin, which an EKS
    # AMI ships in /opt/cni/bin and these nodes do not have. Without it
    # every sandbox fails after vpcnet's ADD, and containerd 2.4 sends no
    # DEL for it: the agent reclaims those addresses only minutes later.
    use_internal_loopback = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{{.Runc}}"
        SystemdCgroup = false
`))

var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines use cgroup v1 (with an empty cgroup2 mount beside it).
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {{.Cgroup}}
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
providerID: aws:///{{.AZ}}/{{.ID}}
address: "{{.IP}}"
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: {{.Dir}}/ca.crt}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
# The kube-dns Service (addons/coredns.yaml), as kubeadm configures it.
clusterDNS: ["{{.ClusterDNS}}"]
# The node's own resolv.conf (the VPC's resolver), not the machine's.
resolvConf: {{.Dir}}/resolv.conf
volumePluginDir: {{.Dir}}/volume-plugins
podLogsDirectory: /var/log/pods
failSwapOn: false
# A shared development disk must not evict pods or collect the images,
# which no registry can bring back.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusReportFrequency: 10s
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
`))

type bind struct{ Source, Target string }
type sysctlFile struct{ Key, File string }

// nodeRuntime is one node's running containerd, kubelet and kube-proxy.
type nodeRuntime struct {
	spec  nodeSpec
	hs    []string
	shell *process
}

// startNode writes the node's configuration and starts its runtime, then
// waits for containerd's socket.
func startNode(ctx context.Context, s nodeSpec, pauseImage string) (_ *nodeRuntime, err error) {
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	n := &nodeRuntime{spec: s, hs: hs}
	defer func() {
		if err != nil {
			n.stop()
		}
	}()
	if err := makeCgroup(hs, s.Cgroup+"/system"); err != nil {
		return nil, err
	}
	var binds []bind
	for _, p := range hostPaths {
		if err := os.MkdirAll(s.hostDir(p), 0o755); err != nil {
			return nil, err
		}
		binds = append(binds, bind{Source: s.hostDir(p), Target: p})
	}
	var fileBinds []bind
	for _, p := range hostFiles {
		if err := writeFile(s.hostDir(p), nil); err != nil {
			return nil, err
		}
		fileBinds = append(fileBinds, bind{Source: s.hostDir(p), Target: p})
	}
	var sysctls []sysctlFile
	for _, k := range hostSysctls {
		f := filepath.Join(s.Dir, "sysctl", strings.ReplaceAll(k, "/", "."))
		if err := writeFile(f, nil); err != nil {
			return nil, err
		}
		sysctls = append(sysctls, sysctlFile{Key: k, File: f})
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "logs"), 0o700); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(s.Dir, "ca.crt"), s.CA); err != nil {
		return nil, err
	}
	server := "https://" + APIAddress.String()
	if err := writeKubeconfig(filepath.Join(s.Dir, "kubelet.kubeconfig"), server, s.CA, s.Identity); err != nil {
		return nil, err
	}
	resolv := fmt.Sprintf("# The VPC's resolver, as EC2 gives every instance.\nsearch %s\nnameserver %s\n", searchDomain(s.Name), s.Resolver)
	if err := writeFile(filepath.Join(s.Dir, "resolv.conf"), []byte(resolv)); err != nil {
		return nil, err
	}
	data := struct {
		nodeSpec
		Hierarchies []string
		Binds       []bind
		FileBinds   []bind
		Sysctls     []sysctlFile
		TaintList   string
		LabelList   string
		PauseImage  string
		Runc        string
	}{s, hs, binds, fileBinds, sysctls, strings.Join(s.Taints, ","), strings.Join(s.Labels, ","), pauseImage, s.Bins.Runc}
	for name, t := range map[string]*template.Template{
		"node.sh": nodeScript, "containerd.toml": containerdConfig, "kubelet.yaml": kubeletConfig,
	} {
		var b strings.Builder
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("node %s: %s: %w", s.ID, name, err)
		}
		if err := writeFile(filepath.Join(s.Dir, name), []byte(b.String())); err != nil {
			return nil, err
		}
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("unshare (util-linux) not found: %w", err)
	}
	env := []string{"PATH=" + filepath.Dir(s.Bins.Containerd) + ":" + filepath.Dir(s.Bins.Shim) + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	n.shell, err = startProcess(s.NetNS, filepath.Join(s.Dir, "logs", "node.log"), env, unshare,
		"--mount", "--uts", "--propagation", "private", "/bin/sh", filepath.Join(s.Dir, "node.sh"))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", s.ID, err)
	}
	for {
		if _, err := os.Stat(s.socketOnHost()); err == nil {
			return n, nil
		}
		if ok, _ := n.shell.Exited(); ok {
			return nil, fmt.Errorf("node %s: %w\ncontainerd: %s", s.ID, n.shell.exitError(), tailFile(filepath.Join(s.Dir, "logs", "containerd.log"), 20))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("node %s: containerd did not start: %w\n%s", s.ID, ctx.Err(), tailFile(filepath.Join(s.Dir, "logs", "containerd.log"), 20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// searchDomain is the DNS search domain EC2 gives an instance: its
// private DNS name without the host part (region.compute.internal).
func searchDomain(nodeName string) string {
	if _, domain, ok := strings.Cut(nodeName, "."); ok {
		return domain
	}
	return "ec2.internal"
}

// importImage loads an image archive into the node's containerd, in the
// namespace the CRI uses.
func (n *nodeRuntime) importImage(ctx context.Context, archive string) error {
	out, err := exec.CommandContext(ctx, n.spec.Bins.Ctr, "--address", n.spec.socketOnHost(), "-n", "k8s.io",
		"images", "import", "--no-unpack=false", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("node %s: import %s: %w: %s", n.spec.ID, filepath.Base(archive), err, out)
	}
	return nil
}

// stop ends the node: SIGTERM to the kubelet, kube-proxy and containerd so
// they exit cleanly, then SIGKILL to every process left in the node's
// cgroup (container processes, shims), found by PID there. The mount
// namespace goes with its last process; then the cgroups are removed.
func (n *nodeRuntime) stop() error {
	for _, name := range []string{"kubelet", "containerd"} {
		data, err := os.ReadFile(filepath.Join(n.spec.Dir, name+".pid"))
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(string(data), &pid); err == nil && pid > 0 && n.inCgroup(pid) {
			_ = syscallKill(pid, sigterm)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(cgroupPIDs(n.hs, n.spec.Cgroup)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; i < 50; i++ {
		if killCgroup(n.hs, n.spec.Cgroup) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n.shell != nil {
		n.shell.stop(time.Second)
	}
	return removeCgroup(n.hs, n.spec.Cgroup)
}

// inCgroup says whether pid is one of the node's processes, so a PID file
// left by an earlier run can never make stop signal someone else.
func (n *nodeRuntime) inCgroup(pid int) bool {
	for _, p := range cgroupPIDs(n.hs, n.spec.Cgroup) {
		if p == pid {
			return true
		}
	}
	return false
}
