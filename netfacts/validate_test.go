package netfacts

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestValidateAttachmentAppliesTheCNIRulesWithBounds(t *testing.T) {
	id64 := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		name                    string
		network, container, ifn string
		want                    string // "" for valid
	}{
		{"containerd key", "vpcnet", id64, "eth0", ""},
		{"dots, dashes and underscores", "aws-cni.v1_x", "pod_1.sandbox-2", "net1", ""},
		{"longest container ID", "vpcnet", strings.Repeat("a", MaxContainerIDLen), "eth0", ""},
		{"15-byte interface", "vpcnet", id64, "abcdefghijklmno", ""},
		{"no network", "", id64, "eth0", `network name "": is empty`},
		{"network starts with a dash", "-net", id64, "eth0", `network name "-net": must be a letter or digit followed by`},
		{"network with a slash", "a/b", id64, "eth0", `network name "a/b": must be a letter or digit`},
		{"network too long", strings.Repeat("n", 256), id64, "eth0", "network name \"" + strings.Repeat("n", 64) + "\"... (256 bytes): is longer than 255 bytes"},
		{"no container", "vpcnet", "", "eth0", `container ID "": is empty`},
		{"container ID too long", "vpcnet", strings.Repeat("c", 100_000), "eth0",
			"container ID \"" + strings.Repeat("c", 64) + "\"... (100000 bytes): is longer than 255 bytes"},
		{"container ID with a space", "vpcnet", "a b", "eth0", `container ID "a b": must be a letter or digit`},
		{"container ID with a newline", "vpcnet", "a\nb", "eth0", `container ID "a\nb": must be a letter or digit`},
		{"container ID with a path", "vpcnet", "../../etc", "eth0", `container ID "../../etc": must be a letter or digit`},
		{"no interface", "vpcnet", id64, "", `interface name "": is empty`},
		{"interface too long", "vpcnet", id64, "abcdefghijklmnop", `interface name "abcdefghijklmnop": is longer than 15 bytes`},
		{"interface dot-dot", "vpcnet", id64, "..", `interface name "..": must be 1-15 bytes, not "." or ".."`},
		{"interface with a colon", "vpcnet", id64, "eth0:1", `interface name "eth0:1": must be 1-15 bytes`},
		{"interface with a tab", "vpcnet", id64, "eth\t0", `interface name "eth\t0": must be 1-15 bytes`},
		{"all three wrong", "", "", "", `network name "": is empty; container ID "": is empty; interface name "": is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateAttachment(tt.network, tt.container, tt.ifn)
			checkErr(t, err, tt.want)
		})
	}
}

func TestValidatePodAppliesKubernetesNameRules(t *testing.T) {
	tests := []struct {
		name, namespace, pod string
		want                 string // "" for valid
	}{
		{"ordinary pod", "default", "web-7d9f8c6b5-x2k4q", ""},
		{"pod name with dots", "kube-system", "coredns.v1.example", ""},
		{"longest names", strings.Repeat("a", 63), strings.Repeat("b", 253), ""},
		{"namespace walks the path", "../../x", "web", `pod namespace "../../x": must be a DNS-1123 label`},
		{"namespace with upper case", "Default", "web", `pod namespace "Default": must be a DNS-1123 label`},
		{"namespace with a dot", "a.b", "web", `pod namespace "a.b": must be a DNS-1123 label`},
		{"namespace too long", strings.Repeat("a", 64), "web", "pod namespace \"" + strings.Repeat("a", 64) + "\": is longer than 63 bytes (Kubernetes' limit)"},
		{"no namespace", "", "web", `pod namespace "": is empty`},
		{"no pod name", "default", "", `pod name "": is empty`},
		{"pod name with a slash", "default", "a/b", `pod name "a/b": must be a DNS-1123 subdomain`},
		{"pod name too long", "default", strings.Repeat("b", 254), "(254 bytes): is longer than 253 bytes (Kubernetes' limit)"},
		{"pod name with NUL", "default", "web\x00", `pod name "web\x00": must be a DNS-1123 subdomain`},
		{"both wrong", "A", "B", `pod namespace "A": must be a DNS-1123 label`},
		{"pod name with an empty label", "default", "a..b", `pod name "a..b": must be a DNS-1123 subdomain`},
		{"pod name ending in a dash", "default", "web-", `pod name "web-": must be a DNS-1123 subdomain`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, ValidatePod(tt.namespace, tt.pod), tt.want)
		})
	}
}

func TestValidationErrorsAreFieldErrors(t *testing.T) {
	err := ValidatePod("A", "B")
	var list Errors
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("ValidatePod(A, B) = %#v, want two errors", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "pod namespace" || fe.Value != "A" {
		t.Errorf("first FieldError = %+v, want the pod namespace", fe)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans lines: %q", err)
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("refused: %v", err)
	case want != "" && err == nil:
		t.Errorf("accepted, want an error containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("error\n got %s\nwant it to contain %s", err, want)
	}
}

// libcni's interface name rule lets through a NUL, which the kernel reads
// as the end of the name (the pod gets "eth", the key says "eth\x000"),
// invalid UTF-8, which the checkpoint's JSON turns into U+FFFD (after a
// restart the key no longer matches the runtime's), and control
// characters, which corrupt logs. FuzzValidate found the second.
func TestValidateIfNameRefusesWhatTheKernelOrTheCheckpointWouldChange(t *testing.T) {
	for _, name := range []string{"eth\x000", "eth\xff", "\xff", "eth\x7f", "eth\x1b[0m"} {
		err := ValidateIfName(name)
		if err == nil {
			t.Errorf("ValidateIfName(%q) accepted it", name)
			continue
		}
		if !strings.Contains(err.Error(), "UTF-8 without control characters") {
			t.Errorf("ValidateIfName(%q) = %v, want the rule named", name, err)
		}
	}
	for _, name := range []string{"eth0", "net1", "enib5faff8a083", "veth-é"} {
		if err := ValidateIfName(name); err != nil {
			t.Errorf("ValidateIfName(%q): %v", name, err)
		}
	}
}

// netfacts writes Kubernetes' name rules out rather than import them (the
// agent must not depend on k8s.io); they must agree with Kubernetes' own
// on every case above and every fuzz input (FuzzValidate).
func TestPodRulesAreKubernetesRules(t *testing.T) {
	for _, v := range []string{"default", "kube-system", "a", "0", "a-b", "a.b", "a..b", "-a", "a-", "A", "web_1", "web\x00",
		"coredns.v1.example", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("b", 253), strings.Repeat("b", 254),
		strings.Repeat("a.", 126) + "a", "é", "a b", "../../x"} {
		sameAsKubernetes(t, v)
	}
}

func sameAsKubernetes(t *testing.T, v string) {
	t.Helper()
	if v == "" {
		return // Kubernetes' functions say nothing of empty; netfacts refuses it
	}
	if got, want := ValidatePodNamespace(v) == nil, len(validation.IsDNS1123Label(v)) == 0; got != want {
		t.Errorf("namespace %q: netfacts accepts %t, Kubernetes %t", v, got, want)
	}
	if got, want := ValidatePodName(v) == nil, len(validation.IsDNS1123Subdomain(v)) == 0; got != want {
		t.Errorf("pod name %q: netfacts accepts %t, Kubernetes %t", v, got, want)
	}
}
