package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vpcnet/vpcnet/agentexec"
	"github.com/vpcnet/vpcnet/version"
)

const kubectlAbout = `Reaches NODE's vpcnet agent through the API server: finds the agent's pod
on NODE (label ` + agentexec.Selector + `) and runs vpcnetctl in its container
(pods/exec), so the answer is what vpcnetctl on the node would print.

commands:
  status NODE [-o table|json]   the agent's readiness, counts, planned change, problems
  doctor NODE [-o table|json]   doctor's findings on NODE
  policy NODE [NAMESPACE/POD] [-o table|json]
                                NetworkPolicy enforcement on NODE, and the verdicts of
                                a pod that runs there
  preswitch [-o table|json]     before switching from the Amazon VPC CNI: aws-node's
                                settings as vpcnetd would read them (those it would
                                refuse, with what to do), pods whose hostPorts stay
                                with aws-node's rules; exit 1 when not ready
  version                       this plugin's version

RBAC: the ClusterRole vpcnet-operator in deploy/vpcnet.yaml (list pods, create
pods/exec), bound in the agent's namespace with a RoleBinding; preswitch reads
the DaemonSet aws-node in --namespace and lists pods in every namespace.

exit codes:
  0, 1, 2  as vpcnetctl on the node (0 ready/ok, 1 not ready or failed, 2 usage)
  3        the agent could not be reached: no agent pod on NODE, or the API
           server refused or failed the exec (the message says which)`

// runKubectl is main for the binary installed as kubectl-vpcnet.
func runKubectl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newCmdFlags("vpcnet", "status|doctor NODE [-o table|json] | policy NODE [NAMESPACE/POD] [-o table|json] | preswitch [-o table|json] | version", kubectlAbout)
	f.Init("kubectl vpcnet", flag.ContinueOnError)
	kubeconfig := f.String("kubeconfig", "", "kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	kubeContext := f.String("context", "", "kubeconfig context (default the current one)")
	namespace := f.String("namespace", agentexec.Namespace, "namespace of vpcnet's DaemonSet")
	f.StringVar(namespace, "n", agentexec.Namespace, "short for --namespace")
	output := f.String("o", "table", "output format: table or json")
	pos, err := f.parse(args, stdout)
	if err != nil {
		return exitCode(err, "kubectl vpcnet", stderr)
	}
	if len(pos) == 1 && pos[0] == "version" {
		// No agent to compare with where kubectl runs: `kubectl vpcnet
		// status NODE` shows the node's agent version.
		fmt.Fprintf(stdout, "kubectl-vpcnet %s\n", version.Get())
		return exitOK
	}
	if !kubectlArgsOK(pos) {
		return exitCode(fmt.Errorf("%w: want `kubectl vpcnet status NODE`, `kubectl vpcnet doctor NODE`, `kubectl vpcnet policy NODE [NAMESPACE/POD]` or `kubectl vpcnet preswitch` (kubectl vpcnet --help)", errUsage), "kubectl vpcnet", stderr)
	}
	if *output != "table" && *output != "json" {
		return exitCode(fmt.Errorf("%w: -o %q: want table or json", errUsage, *output), "kubectl vpcnet", stderr)
	}
	if len(pos) == 3 {
		if err := checkPodArg(pos[2]); err != nil {
			return exitCode(err, "kubectl vpcnet", stderr)
		}
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: *kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{CurrentContext: *kubeContext},
	).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "kubectl vpcnet: kubeconfig: %v (give --kubeconfig FILE or set KUBECONFIG)\n", err)
		return exitFailed
	}
	if pos[0] == "preswitch" {
		return runPreswitch(ctx, rc, *namespace, *output, stdout, stderr)
	}
	argv := append([]string{"vpcnetctl", pos[0]}, pos[2:]...)
	if *output == "json" {
		argv = append(argv, "-o", "json") // the table is each command's default
	}
	return onNode(ctx, rc, *namespace, pos[1], argv, stdout, stderr)
}

// kubectlArgsOK says whether pos is a command kubectl vpcnet runs on a
// node: status or doctor NODE, policy NODE [NAMESPACE/POD].
func kubectlArgsOK(pos []string) bool {
	if len(pos) == 1 && pos[0] == "preswitch" {
		return true
	}
	if len(pos) < 2 {
		return false
	}
	switch pos[0] {
	case "status", "doctor":
		return len(pos) == 2
	case "policy":
		return len(pos) <= 3
	}
	return false
}

// runPreswitch prints the pre-switch check: exit 0 when the switch can go
// ahead (or there is no aws-node), 1 when vpcnetd would refuse a setting.
func runPreswitch(ctx context.Context, rc *rest.Config, namespace, output string, stdout, stderr io.Writer) int {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl vpcnet: %v\n", err)
		return exitFailed
	}
	r, err := preswitch(ctx, cs, namespace)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl vpcnet preswitch: %v\n", err)
		return exitUnreachable
	}
	if err := r.print(stdout, output); err != nil {
		fmt.Fprintf(stderr, "kubectl vpcnet preswitch: %v\n", err)
		return exitFailed
	}
	if r.DaemonSet != "" && !r.Ready() {
		return exitFailed
	}
	return exitOK
}

// onNode runs argv in the agent's container on node and returns its exit
// code, or exitUnreachable when it could not be run.
func onNode(ctx context.Context, rc *rest.Config, namespace, node string, argv []string, stdout, stderr io.Writer) int {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl vpcnet: %v\n", err)
		return exitFailed
	}
	pod, err := agentexec.FindAgentPod(ctx, cs, namespace, node)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl vpcnet: %v\n", err)
		return exitUnreachable
	}
	code, err := agentexec.Exec(ctx, rc, cs, pod, agentexec.Container, argv, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl vpcnet: %v\n", err)
		return exitUnreachable
	}
	return code
}
