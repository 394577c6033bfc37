package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vpcnet/vpcnet/internal/kubetest"
)

// The Amazon VPC CNI's two images as the local cloud builds them (the
// manifest's amazon-k8s-cni and amazon-k8s-cni-init).
const (
	AWSNodeImage     = "vpcnet.local/amazon-k8s-cni:local"
	AWSNodeInitImage = "vpcnet.local/amazon-k8s-cni-init:local"
)

// AWSNodeManifest is the file in AWSNode.Dir that holds aws-node's own
// manifest, config/master/aws-k8s-cni.yaml of its module, unmodified.
const AWSNodeManifest = "aws-k8s-cni.yaml"

// awsNodePrograms are what aws-node's release image puts in /app
// (scripts/dockerfiles/Dockerfile.release), by the names hack/kube-build.sh
// gives them; awsNodeFiles the data files beside them (misc/ of its
// module). 10-aws.conflist is the template the entrypoint fills in.
var (
	awsNodePrograms = []string{"aws-k8s-agent", "aws-cni", "egress-cni", "aws-vpc-cni", "grpc-health-probe"}
	awsNodeFiles    = []string{"10-aws.conflist", "eni-max-pods.txt"}
	// awsNodeInitPrograms are the init image's /init: its entrypoint and
	// the reference plugins it copies to the node's /opt/cni/bin. Upstream
	// copies every plugin of containernetworking/plugins; these are the
	// ones aws-node's configurations name (loopback for the pod's lo,
	// host-local for the egress plugin, portmap, and bandwidth when
	// ENABLE_BANDWIDTH_PLUGIN is set). Its aws-cni-support.sh, a log
	// collector its build fetches from GitHub, is not here: the local
	// cloud reaches no GitHub.
	awsNodeInitPrograms = map[string]string{
		"aws-vpc-cni-init": "aws-vpc-cni-init", "cni-loopback": "loopback", "cni-host-local": "host-local",
		"cni-portmap": "portmap", "cni-bandwidth": "bandwidth",
	}
	// iptablesPrograms are what aws-node runs of iptables (go-iptables
	// execs them; its base image, eks-distro-minimal-base-iptables, has
	// them), each a link to xtables-nft-multi as Debian's alternatives
	// set them: the nf_tables backend, the one this kernel and the
	// nodes' kube-proxy (nftables mode) use.
	iptablesPrograms = []string{
		"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore",
		"/usr/sbin/ip6tables", "/usr/sbin/ip6tables-save", "/usr/sbin/ip6tables-restore",
	}
)

// xtablesDir holds the iptables extensions, which iptables loads with
// dlopen (so no ELF header names them).
const xtablesDir = "/usr/lib/x86_64-linux-gnu/xtables"

// AWSNode is where the Amazon VPC CNI's programs, data files and
// manifest are (make aws-node-bins links them into bin/aws-node).
type AWSNode struct {
	Dir string
}

// awsNodeRootfs is aws-node's main image: /app as its release image has
// it, Debian's iptables (nf_tables backend) with its extensions, and
// /app as the working directory (its entrypoint runs ./aws-k8s-agent).
func awsNodeRootfs(dir string) (*rootfs, imageConfig, error) {
	r := newRootfs()
	r.accounts([]string{"root:x:0:0:root:/root:/sbin/nologin"}, []string{"root:x:0:"})
	r.dir("/app", 0o755)
	for _, p := range awsNodePrograms {
		if err := r.copyFile(filepath.Join(dir, p), "/app/"+p); err != nil {
			return nil, imageConfig{}, fmt.Errorf("%s (make aws-node-bins): %w", p, err)
		}
	}
	for _, f := range awsNodeFiles {
		if err := r.copyFile(filepath.Join(dir, f), "/app/"+f); err != nil {
			return nil, imageConfig{}, fmt.Errorf("%s (make aws-node-bins): %w", f, err)
		}
	}
	for _, p := range iptablesPrograms {
		if err := r.program(p, "iptables"); err != nil {
			return nil, imageConfig{}, err
		}
	}
	exts, err := filepath.Glob(filepath.Join(xtablesDir, "*.so"))
	if err != nil || len(exts) == 0 {
		return nil, imageConfig{}, fmt.Errorf("no iptables extensions in %s (apt-get install iptables): %v", xtablesDir, err)
	}
	for _, so := range exts {
		if err := r.program(so, "iptables"); err != nil {
			return nil, imageConfig{}, err
		}
	}
	// The tmp directory its entrypoint writes the filled-in conflist to.
	r.dir("/tmp", 0o1777)
	return r, imageConfig{Entrypoint: []string{"/app/aws-vpc-cni"}, WorkingDir: "/app"}, nil
}

// awsNodeInitRootfs is aws-node's init image: /init with its entrypoint
// and the plugins it installs, run from /init (it copies "." but itself).
func awsNodeInitRootfs(dir string) (*rootfs, imageConfig, error) {
	r := newRootfs()
	r.accounts([]string{"root:x:0:0:root:/root:/sbin/nologin"}, []string{"root:x:0:"})
	r.dir("/init", 0o755)
	for src, dst := range awsNodeInitPrograms {
		if err := r.copyFile(filepath.Join(dir, src), "/init/"+dst); err != nil {
			return nil, imageConfig{}, fmt.Errorf("%s (make aws-node-bins): %w", src, err)
		}
	}
	return r, imageConfig{Cmd: []string{"/init/aws-vpc-cni-init"}, WorkingDir: "/init"}, nil
}

// InstallAWSNode applies aws-node's own manifest as an operator would,
// changed only as LocalAWSNodeManifest says.
func (c *Cluster) InstallAWSNode(ctx context.Context) error { return c.InstallAWSNodeOn(ctx, nil) }

// InstallAWSNodeOn is InstallAWSNode with aws-node's pods kept to the
// nodes carrying every label of nodeSelector (all nodes when empty).
func (c *Cluster) InstallAWSNodeOn(ctx context.Context, nodeSelector map[string]string) error {
	if c.opts.AWSNode == nil {
		return errors.New("kubecluster: the cluster was started without Options.AWSNode: its images are not on the nodes")
	}
	manifest, err := os.ReadFile(filepath.Join(c.opts.AWSNode.Dir, AWSNodeManifest))
	if err != nil {
		return fmt.Errorf("aws-node's manifest (make aws-node-bins): %w", err)
	}
	out, err := LocalAWSNodeManifest(manifest, []string{
		"AWS_ENDPOINT_URL_EC2=http://127.0.0.1:8780",
		"AWS_ACCESS_KEY_ID=local-cloud", "AWS_SECRET_ACCESS_KEY=local-cloud",
	})
	if err != nil {
		return err
	}
	if out, err = selectNodes(out, "aws-node", nodeSelector); err != nil {
		return err
	}
	c.log.Info("installing the Amazon VPC CNI from its own manifest", "image", AWSNodeImage)
	return kubetest.Apply(ctx, c.Config, out)
}

// awsNodePolicyAgent is the network policy agent's container in
// aws-node's DaemonSet.
const awsNodePolicyAgent = "aws-eks-nodeagent"

// LocalAWSNodeManifest is aws-node's manifest (config/master/aws-k8s-cni.yaml)
// for the local cloud: its images are the local ones and the aws-node
// container gets env (the EC2 endpoint and credentials, KEY=VALUE). One
// more change, forced by what this machine can build: the network policy
// agent's container goes, and NETWORK_POLICY_ENFORCING_MODE with it. The
// agent's module needs github.com/aws/aws-ebpf-sdk-go, which the module
// proxy here does not serve; the manifest runs it with network policy off,
// and aws-cni skips it when the setting is unset (its own comment: "NP
// container might have been removed if network policies are not being
// used"), where "standard" would make every ADD dial its socket and fail.
// Nothing else changes (TestLocalAWSNodeManifestChangesOnlyImagesEnvAndThePolicyAgent).
func LocalAWSNodeManifest(manifest []byte, env []string) ([]byte, error) {
	found := false
	out, err := editObjects(manifest, func(o *unstructured.Unstructured) error {
		if o.GetKind() != "DaemonSet" || o.GetName() != "aws-node" {
			return nil
		}
		found = true
		return localAWSNodeDaemonSet(o, env)
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("aws-node's manifest has no DaemonSet named aws-node")
	}
	return out, nil
}

func localAWSNodeDaemonSet(o *unstructured.Unstructured, env []string) error {
	spec := []string{"spec", "template", "spec"}
	inits, _, err := unstructured.NestedSlice(o.Object, append(spec, "initContainers")...)
	if err != nil {
		return err
	}
	for i, item := range inits {
		ctr, ok := item.(map[string]any)
		if !ok {
			return fmt.Errorf("aws-node initContainers[%d] is not an object", i)
		}
		ctr["image"] = AWSNodeInitImage
	}
	if err := unstructured.SetNestedSlice(o.Object, inits, append(spec, "initContainers")...); err != nil {
		return err
	}
	ctrs, _, err := unstructured.NestedSlice(o.Object, append(spec, "containers")...)
	if err != nil {
		return err
	}
	var kept []any
	for i, item := range ctrs {
		ctr, ok := item.(map[string]any)
		if !ok {
			return fmt.Errorf("aws-node containers[%d] is not an object", i)
		}
		switch ctr["name"] {
		case awsNodePolicyAgent:
			continue
		case "aws-node":
			ctr["image"] = AWSNodeImage
			existing, _ := ctr["env"].([]any)
			var vars []any
			for _, e := range existing {
				if m, ok := e.(map[string]any); ok && m["name"] == "NETWORK_POLICY_ENFORCING_MODE" {
					continue
				}
				vars = append(vars, e)
			}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				vars = append(vars, map[string]any{"name": k, "value": v})
			}
			ctr["env"] = vars
		default:
			return fmt.Errorf("aws-node's DaemonSet has a container %v this recipe does not know: see LocalAWSNodeManifest", ctr["name"])
		}
		kept = append(kept, ctr)
	}
	return unstructured.SetNestedSlice(o.Object, kept, append(spec, "containers")...)
}
