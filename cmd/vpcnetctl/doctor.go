package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/introspect"
)

const doctorUsage = `usage: vpcnetctl doctor [flags]

Reads this node's vpcnetd, checkpoint, host networking, CNI configuration,
IMDS, EC2 (Describe and DryRun calls only) and, with credentials, the
Kubernetes API, and prints what is wrong with the evidence and the fix.
Changes nothing. Exit status: 0 no error finding, 1 at least one error
finding, 2 a usage error.

flags:
`

// doctorSources are the names --skip takes.
var doctorSources = []string{doctor.SourceAgent, doctor.SourceCheckpoint, doctor.SourceHost, doctor.SourceCNI, doctor.SourceIMDS, doctor.SourceEC2, doctor.SourceKube}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.String("agent", introspect.DefaultAddr, "vpcnetd's introspection address or URL (INTROSPECTION_BIND_ADDRESS)")
	stateDir := fs.String("state-dir", "/var/lib/vpcnet", "the agent's state directory (VPCNET_STATE_DIR)")
	cpPath := fs.String("checkpoint", "", "the agent's checkpoint file (default STATE-DIR/checkpoint.json)")
	confDir := fs.String("cni-conf-dir", "/etc/cni/net.d", "the container runtime's CNI configuration directory")
	binDir := fs.String("cni-bin-dir", "/opt/cni/bin", "the container runtime's CNI plugin directory")
	imdsEP := fs.String("imds-endpoint", doctor.DefaultIMDSEndpoint, "IMDS endpoint (VPCNET_IMDS_ENDPOINT)")
	ec2EP := fs.String("ec2-endpoint", "", "EC2 endpoint override (VPCNET_EC2_ENDPOINT); default is the Region's")
	region := fs.String("region", "", "AWS Region; default from IMDS or AWS_REGION")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for the Kubernetes API; default KUBECONFIG, else in-cluster, else none")
	awsNodeCP := fs.String("aws-node-checkpoint", "/var/run/aws-node/ipam.json", "the Amazon VPC CNI's checkpoint, a leftover after switching")
	kubeletLog := fs.String("kubelet-log", "/var/log/kubelet.log", "kubelet's log file, searched for Unauthorized if readable")
	cluster := fs.String("cluster-name", "", "CLUSTER_NAME, when the agent cannot say it")
	taint := fs.String("startup-taint", "", "VPCNET_STARTUP_TAINT, when the agent cannot say it")
	skip := fs.String("skip", "", "comma-separated sources not to read: "+strings.Join(doctorSources, ","))
	output := fs.String("o", "table", "output: table or json")
	timeout := fs.Duration("timeout", 60*time.Second, "how long doctor may take in all")
	fs.Usage = func() {
		fmt.Fprint(stderr, doctorUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (doctor takes only flags; see --help)", errUsage, fs.Arg(0))
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("%w: -o %q: want table or json", errUsage, *output)
	}
	skipped := map[string]bool{}
	for s := range strings.SplitSeq(*skip, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(doctorSources, s) {
			return fmt.Errorf("%w: --skip %s: not a source; sources are %s", errUsage, s, strings.Join(doctorSources, ", "))
		}
		skipped[s] = true
	}
	if *cpPath == "" {
		*cpPath = filepath.Join(*stateDir, "checkpoint.json")
	}

	r := doctor.Readers{ClusterName: *cluster, StartupTaint: *taint, Skipped: skipped}
	if !skipped[doctor.SourceAgent] {
		r.Agent = &introspect.Client{Base: *agent}
	}
	if !skipped[doctor.SourceCheckpoint] {
		r.CheckpointPath = *cpPath
	}
	if !skipped[doctor.SourceHost] {
		r.Host = doctor.HostReader{AWSNodeCheckpoint: *awsNodeCP, KubeletLog: *kubeletLog}
	}
	if !skipped[doctor.SourceCNI] {
		r.CNI = doctor.CNIReader{ConfDir: *confDir, BinDir: *binDir}
	}
	if !skipped[doctor.SourceIMDS] {
		r.Metadata = doctor.IMDSReader{Endpoint: *imdsEP}
	}
	if !skipped[doctor.SourceEC2] {
		r.Cloud = doctor.EC2Reader{Endpoint: *ec2EP, Region: *region}
	}
	if !skipped[doctor.SourceKube] {
		rc, err := kubeConfig(*kubeconfig)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if rc != nil {
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return fmt.Errorf("kubernetes client: %w", err)
			}
			r.Kube = doctor.KubeReader{Client: cs}
		}
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep := doctor.Diagnose(doctor.Gather(ctx, r))
	var err error
	if *output == "json" {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if rep.HasError() {
		n := 0
		for _, f := range rep.Findings {
			if f.Severity == doctor.Error {
				n++
			}
		}
		return fmt.Errorf("%d error findings", n)
	}
	return nil
}

// kubeConfig finds API credentials: the flag, KUBECONFIG, then the pod's
// service account; nil when there are none (doctor then skips the API).
func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return rc, nil
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, nil
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster Kubernetes config: %w", err)
	}
	return rc, nil
}
