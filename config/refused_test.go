package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/verdicts"
)

// awsNodeManifestEnv is the aws-node container's environment in the
// Amazon VPC CNI's own manifest (config/master/aws-k8s-cni.yaml, v1.23):
// a cluster switching over with it unchanged must start.
var awsNodeManifestEnv = []string{
	"ADDITIONAL_ENI_TAGS={}",
	"AWS_VPC_CNI_NODE_PORT_SUPPORT=true",
	"AWS_VPC_ENI_MTU=9001",
	"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=false",
	"AWS_VPC_K8S_CNI_EXTERNALSNAT=false",
	"AWS_VPC_K8S_CNI_LOGLEVEL=DEBUG",
	"AWS_VPC_K8S_CNI_LOG_FILE=/host/var/log/aws-routed-eni/ipamd.log",
	"AWS_VPC_K8S_CNI_RANDOMIZESNAT=prng",
	"AWS_VPC_K8S_CNI_VETHPREFIX=eni",
	"AWS_VPC_K8S_PLUGIN_LOG_FILE=/var/log/aws-routed-eni/plugin.log",
	"AWS_VPC_K8S_PLUGIN_LOG_LEVEL=DEBUG",
	"DISABLE_INTROSPECTION=false",
	"DISABLE_METRICS=false",
	"DISABLE_NETWORK_RESOURCE_PROVISIONING=false",
	"ENABLE_IMDS_ONLY_MODE=false",
	"ENABLE_IPv4=true",
	"ENABLE_IPv6=false",
	"ENABLE_MULTI_NIC=false",
	"ENABLE_POD_ENI=false",
	"ENABLE_PREFIX_DELEGATION=false",
	"ENABLE_SUBNET_DISCOVERY=true",
	"NETWORK_POLICY_ENFORCING_MODE=standard",
	"VPC_CNI_VERSION=v1.23.1",
	"WARM_ENI_TARGET=1",
	"WARM_PREFIX_TARGET=1",
	"MY_NODE_NAME=ip-10-0-1-5.ec2.internal",
	"MY_POD_NAME=aws-node-x7k2p",
}

// podEnv is what the kubelet and the image put in every container's
// environment, including the service links of Services whose names
// start like vpcnet's prefixes.
var podEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOSTNAME=ip-10-0-1-5.ec2.internal",
	"HOME=/root",
	"KUBERNETES_SERVICE_HOST=10.100.0.1",
	"KUBERNETES_SERVICE_PORT=443",
	"KUBERNETES_SERVICE_PORT_HTTPS=443",
	"KUBERNETES_PORT=tcp://10.100.0.1:443",
	"KUBERNETES_PORT_443_TCP=tcp://10.100.0.1:443",
	"KUBERNETES_PORT_443_TCP_PROTO=tcp",
	"KUBERNETES_PORT_443_TCP_PORT=443",
	"KUBERNETES_PORT_443_TCP_ADDR=10.100.0.1",
	"VPCNET_METRICS_SERVICE_HOST=10.100.7.9",
	"VPCNET_METRICS_SERVICE_PORT=61678",
	"VPCNET_METRICS_SERVICE_PORT_METRICS=61678",
	"VPCNET_METRICS_PORT=tcp://10.100.7.9:61678",
	"VPCNET_METRICS_PORT_61678_TCP=tcp://10.100.7.9:61678",
	"VPCNET_METRICS_PORT_61678_TCP_PROTO=tcp",
	"VPCNET_METRICS_PORT_61678_TCP_PORT=61678",
	"VPCNET_METRICS_PORT_61678_TCP_ADDR=10.100.7.9",
	"WARM_CACHE_SERVICE_HOST=10.100.3.3",
	"AWS_REGION=eu-west-1",
	"AWS_DEFAULT_REGION=eu-west-1",
	"AWS_ROLE_ARN=arn:aws:iam::111122223333:role/vpcnet",
	"AWS_WEB_IDENTITY_TOKEN_FILE=/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
	"AWS_STS_REGIONAL_ENDPOINTS=regional",
	"GOMAXPROCS=2",
	"TERM=xterm",
	"NO_VALUE",
	// vpcnet's test and tool variables, which a developer's shell may hold.
	"VPCNET_KUBE_APISERVER=/var/cache/vpcnet/kube-apiserver",
	"VPCNET_E2E_LOGS=/tmp/logs",
}

func TestLoadEnvironStartsWithTheAmazonVPCCNIManifestAndThePodEnvironment(t *testing.T) {
	c, err := LoadEnviron(append(append([]string{}, awsNodeManifestEnv...), podEnv...))
	if err != nil {
		t.Fatalf("aws-node's own manifest with a pod's environment: %v", err)
	}
	if c.NodeName != "ip-10-0-1-5.ec2.internal" || c.LogLevel.String() != "DEBUG" {
		t.Errorf("settings not read: %+v", c)
	}
	// aws-node's manifest asks for standard mode; vpcnet enforces
	// NetworkPolicy with the same meaning.
	if !c.NetworkPolicy || c.NetworkPolicyMode != verdicts.Standard {
		t.Errorf("NetworkPolicy %t, mode %q; want on, standard", c.NetworkPolicy, c.NetworkPolicyMode)
	}
}

func TestLoadRefusesAmazonVPCCNISettingsVpcnetLacks(t *testing.T) {
	tests := []struct {
		name, value string
		instead     string // a part of what to do instead
	}{
		{"ENABLE_MULTI_NIC", "true", "network card 0 only"},
		{"ENABLE_MULTI_NIC", "1", "network card 0 only"},
		{"AWS_VPC_CNI_NODE_PORT_SUPPORT", "false", "NodePort"},
		{"HOST_CNI_BIN_PATH", "/host/usr/libexec/cni", "vpcnet-install `-to`"},
		{"HOST_CNI_CONFDIR_PATH", "/host/etc/cni/conf.d", "VPCNET_CNI_CONF_DIR"},
		{"AWS_VPC_K8S_CNI_LOG_FILE", "/var/log/ipamd.log", "stderr"},
		{"AWS_VPC_K8S_PLUGIN_LOG_FILE", "/var/log/plugin.log", "container runtime"},
		{"AWS_VPC_K8S_PLUGIN_LOG_LEVEL", "ERROR", "AWS_VPC_K8S_CNI_LOGLEVEL"},
		{"AWS_VPC_K8S_CNI_CONNMARK", "0x40", "0x80"},
		{"AWS_VPC_K8S_CNI_CONFIGURE_RPFILTER", "off", "rp_filter"},
		{"AWS_VPC_K8S_CNI_BACKING_STORE", "/var/lib/ipam.json", "VPCNET_AWS_VPC_CNI_CHECKPOINT"},
		{"CLUSTER_ENDPOINT", "https://ABC.gr7.eu-west-1.eks.amazonaws.com", "VPCNET_KUBECONFIG"},
		{"AWS_EC2_ENDPOINT", "https://ec2.eu-west-1.amazonaws.com", "VPCNET_EC2_ENDPOINT"},
		{"HTTP_TIMEOUT", "30", "VPCNET_EC2_CALL_TIMEOUT"},
		{"POD_SECURITY_GROUP_ENFORCING_MODE", "relaxed", "security groups for pods"},
		{"DISABLE_TCP_EARLY_DEMUX", "true", "tcp_early_demux"},
		{"DISABLE_NETWORK_RESOURCE_PROVISIONING", "true", "MAX_ENI"},
		{"ENABLE_IMDS_ONLY_MODE", "true", "iam-policy.json"},
		{"ANNOTATE_POD_IP", "true", "status.podIPs"},
		{"ENABLE_NFTABLES", "maybe", "nftables"},
		{"AWS_EXTERNAL_SERVICE_CIDRS", "10.200.0.0/16", "follows the main table"},
		{"ENABLE_V6_EGRESS", "true", "IPv6 egress"},
		{"DISABLE_POD_V6", "true", "securityContext.sysctls"},
		{"MANAGE_UNTAGGED_ENI", "false", "no_manage=true"},
	}
	refused := map[string]bool{}
	for _, tt := range tests {
		refused[tt.name] = true
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := Load(env(map[string]string{tt.name: tt.value}))
			var cerr *Error
			if !errors.As(err, &cerr) || len(cerr.Problems) != 1 {
				t.Fatalf("Load = %v, want one problem naming %s", err, tt.name)
			}
			p := cerr.Problems[0]
			if p.Name != tt.name || p.Value != tt.value || !strings.HasPrefix(p.Allowed, "not implemented by vpcnet: ") || !strings.Contains(p.Allowed, tt.instead) {
				t.Errorf("problem = %s, want %s=%q naming %q", p, tt.name, tt.value, tt.instead)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
	for _, r := range Refusals() {
		if !refused[r.Name] {
			t.Errorf("%s: no test refuses a value of it", r.Name)
		}
	}
}

func TestRefusalsAreNoSettingAndListedOnce(t *testing.T) {
	names := map[string]bool{}
	for _, s := range settings {
		names[s.name] = true
	}
	for _, r := range refusals {
		if names[r.name] {
			t.Errorf("%s is both a setting and refused", r.name)
		}
		names[r.name] = true
		if r.accepted == "" || r.instead == "" {
			t.Errorf("%s: the docs need what is accepted and what to do instead", r.name)
		}
	}
}

func TestLoadEnvironRefusesUnknownVpcnetNamesNamingTheClosest(t *testing.T) {
	tests := []struct {
		kv, name, value, closest string
	}{
		{"WARM_IP_TARGT=5", "WARM_IP_TARGT", "5", "WARM_IP_TARGET"},
		{"MINIMUM_IP_TARGETS=30", "MINIMUM_IP_TARGETS", "30", "MINIMUM_IP_TARGET"},
		{"VPCNET_STATEDIR=/var/lib/vpcnet", "VPCNET_STATEDIR", "/var/lib/vpcnet", "VPCNET_STATE_DIR"},
		{"AWS_VPC_K8S_CNI_EXTERNAL_SNAT=true", "AWS_VPC_K8S_CNI_EXTERNAL_SNAT", "true", "AWS_VPC_K8S_CNI_EXTERNALSNAT"},
		{"WARM_PREFIX=1", "WARM_PREFIX", "1", "WARM_PREFIX_TARGET"},
	}
	for _, tt := range tests {
		t.Run(tt.kv, func(t *testing.T) {
			_, err := LoadEnviron(append([]string{tt.kv}, podEnv...))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("LoadEnviron = %v, want a *config.Error", err)
			}
			want := []Problem{{Name: tt.name, Value: tt.value,
				Allowed: "not a vpcnetd setting; did you mean " + tt.closest + "? (docs/settings.md lists them)"}}
			if !reflect.DeepEqual(cerr.Problems, want) {
				t.Errorf("problems\n got %+v\nwant %+v", cerr.Problems, want)
			}
		})
	}
}

func TestLoadEnvironReportsUnknownAndInvalidTogether(t *testing.T) {
	_, err := LoadEnviron([]string{"WARM_IP_TARGET=-1", "WARM_IP_TARGT=5", "ENABLE_MULTI_NIC=true"})
	want := `invalid settings: WARM_IP_TARGET="-1": must be a whole number ≥ 0; ` +
		`ENABLE_MULTI_NIC="true": not implemented by vpcnet: vpcnet manages network card 0 only and leaves interfaces on other cards alone; remove it; ` +
		`WARM_IP_TARGT="5": not a vpcnetd setting; did you mean WARM_IP_TARGET? (docs/settings.md lists them)`
	if err == nil || err.Error() != want {
		t.Errorf("LoadEnviron error\n got %v\nwant %s", err, want)
	}
}
