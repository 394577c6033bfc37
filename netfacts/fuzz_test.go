package netfacts

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzValidate checks that the validators never panic, that what they
// accept is bounded and free of the bytes that would break a file name,
// a log line or an interface name, that an error never repeats a value
// whole, and that the pod rules agree with Kubernetes' own.
func FuzzValidate(f *testing.F) {
	f.Add("vpcnet", strings.Repeat("0123456789abcdef", 4), "eth0", "default", "web-0")
	f.Add("", "", "", "", "")
	f.Add("-", "../../x", "..", "../../x", "a/b")
	f.Add("n", strings.Repeat("c", 300), "eth0:1", strings.Repeat("a", 64), strings.Repeat("b", 254))
	f.Add("n\xff", "c\u2028", "eth\t0", "Default", "web\x00")
	f.Fuzz(func(t *testing.T, network, containerID, ifName, namespace, name string) {
		if err := ValidateAttachment(network, containerID, ifName); err == nil {
			bounded(t, "network name", network, MaxNetworkNameLen)
			bounded(t, "container ID", containerID, MaxContainerIDLen)
			if ifName == "" || len(ifName) > MaxIfNameLen || ifName == "." || ifName == ".." ||
				!utf8.ValidString(ifName) || strings.ContainsFunc(ifName, func(r rune) bool {
				return r == '/' || r == ':' || unicode.IsSpace(r) || unicode.IsControl(r)
			}) {
				t.Errorf("interface name %q accepted", ifName)
			}
		} else {
			short(t, err)
		}
		sameAsKubernetes(t, namespace)
		sameAsKubernetes(t, name)
		if err := ValidatePod(namespace, name); err == nil {
			bounded(t, "pod namespace", namespace, MaxPodNamespaceLen)
			bounded(t, "pod name", name, MaxPodNameLen)
			if strings.Contains(namespace, ".") || strings.Contains(name, "..") {
				t.Errorf("pod %q/%q accepted with a path-like part", namespace, name)
			}
			// The veth name of any valid pod is a valid interface name.
			if err := ValidateIfName(HostVethName(DefaultVethPrefix, namespace, name)); err != nil {
				t.Errorf("veth name of pod %q/%q: %v", namespace, name, err)
			}
		} else {
			short(t, err)
		}
	})
}

func bounded(t *testing.T, field, v string, maxLen int) {
	t.Helper()
	if v == "" || len(v) > maxLen {
		t.Errorf("%s of %d bytes accepted, want 1-%d", field, len(v), maxLen)
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f || r == '/' || r > '~' {
			t.Errorf("%s %q accepted with %q in it", field, v, r)
		}
	}
}

// short: an error quotes at most maxQuoted bytes of each of at most five
// values, plus the rules.
func short(t *testing.T, err error) {
	t.Helper()
	if n := len(err.Error()); n > 5*(4*maxQuoted+600) {
		t.Errorf("error of %d bytes", n)
	}
}
