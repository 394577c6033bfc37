package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
It looks for the agent's files and endpoints where the agent says it keeps
them (/v1/config), unless a flag below says otherwise. Changes nothing. Exit status: 0 no error finding, 1 at least one error
finding, 2 a usage error.

flags:
`

// doctorSources are the names --skip takes.
var doctorSources = []string{doctor.SourceAgent, doctor.SourceCheckpoint, doctor.SourceHost, doctor.SourceCNI, doctor.SourceIMDS, doctor.SourceEC2, doctor.SourceKube}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.String("agent", introspect.DefaultAddr, "vpcnetd's introspection address or URL (INTROSPECTION_BIND_ADDRESS)")
	// The places doctor reads default to the agent's own settings, which
	// it reports on /v1/config, and only then to the DaemonSet's: an agent
	// told to keep its files elsewhere (every node of the local cloud is)
	// must not be diagnosed from someone else's.
	var given doctor.Paths
	fs.StringVar(&given.StateDir, "state-dir", "", "the agent's state `DIR`; "+doctor.PathFlagDefault("VPCNET_STATE_DIR"))
	fs.StringVar(&given.Checkpoint, "checkpoint", "", "the agent's checkpoint `FILE`; default STATE-DIR/checkpoint.json")
	fs.StringVar(&given.CNIConfDir, "cni-conf-dir", "", "the container runtime's CNI configuration `DIR`; "+doctor.PathFlagDefault("VPCNET_CNI_CONF_DIR"))
	fs.StringVar(&given.CNIBinDir, "cni-bin-dir", "", "the container runtime's CNI plugin `DIR`; "+doctor.PathFlagDefault("VPCNET_CNI_BIN_DIR"))
	fs.StringVar(&given.IMDSEndpoint, "imds-endpoint", "", "IMDS endpoint `URL`; "+doctor.PathFlagDefault("VPCNET_IMDS_ENDPOINT"))
	fs.StringVar(&given.EC2Endpoint, "ec2-endpoint", "", "EC2 endpoint `URL`; "+doctor.PathFlagDefault("VPCNET_EC2_ENDPOINT"))
	region := fs.String("region", "", "AWS Region; default from IMDS or AWS_REGION")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for the Kubernetes API; default KUBECONFIG, else in-cluster, else none")
	fs.StringVar(&given.AWSNodeCheckpoint, "aws-node-checkpoint", "", "the Amazon VPC CNI's checkpoint `FILE`, a leftover after switching; "+doctor.PathFlagDefault("VPCNET_AWS_VPC_CNI_CHECKPOINT"))
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

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r := doctor.Readers{ClusterName: *cluster, StartupTaint: *taint, Skipped: skipped}
	var agentSettings map[string]string
	if !skipped[doctor.SourceAgent] {
		client := &introspect.Client{Base: *agent}
		r.Agent = client
		agentSettings = doctor.AgentSettings(ctx, client)
	}
	paths, diffs := given.Resolve(agentSettings)
	r.PathDifferences = diffs
	if !skipped[doctor.SourceCheckpoint] {
		r.CheckpointPath = paths.Checkpoint
	}
	if !skipped[doctor.SourceHost] {
		r.Host = doctor.HostReader{AWSNodeCheckpoint: paths.AWSNodeCheckpoint, KubeletLog: *kubeletLog, VethPrefix: paths.VethPrefix}
	}
	if !skipped[doctor.SourceCNI] {
		r.CNI = doctor.CNIReader{ConfDir: paths.CNIConfDir, BinDir: paths.CNIBinDir}
	}
	if !skipped[doctor.SourceIMDS] {
		r.Metadata = doctor.IMDSReader{Endpoint: paths.IMDSEndpoint}
	}
	if !skipped[doctor.SourceEC2] {
		r.Cloud = doctor.EC2Reader{Endpoint: paths.EC2Endpoint, Region: *region}
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
