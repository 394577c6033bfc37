package netfacts

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
)

// Bounds on the parts of an attachment key. CNI bounds none of them but
// the interface name; the agent records keys in its checkpoint and in
// memory, so an unbounded one is a way to fill both.
const (
	// MaxContainerIDLen allows every runtime's IDs (containerd and CRI-O
	// use 64 hex digits) and stays a valid file name, as libcni's cache
	// makes one of it.
	MaxContainerIDLen = 255
	// MaxNetworkNameLen bounds the CNI network name, for the same reasons.
	MaxNetworkNameLen = 255
	// MaxIfNameLen is the kernel's IFNAMSIZ less the terminating NUL.
	MaxIfNameLen = 15
	// MaxPodNamespaceLen and MaxPodNameLen are Kubernetes' own bounds
	// (a DNS-1123 label and subdomain).
	MaxPodNamespaceLen = 63
	MaxPodNameLen      = 253
)

// maxQuoted is how much of a bad value an error repeats: enough to
// recognise it, never the whole of a value that may be megabytes long.
const maxQuoted = 64

// FieldError says which field is wrong, what it held and which rule it
// breaks.
type FieldError struct {
	// Field names the value as the caller knows it: "container ID",
	// "pod namespace".
	Field string
	// Value is the value, whole; Error quotes at most 64 bytes of it.
	Value string
	// Rule is the rule broken, as a sentence fragment.
	Rule string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Field, quote(e.Value), e.Rule)
}

// quote returns v quoted, cut to maxQuoted bytes with its length when
// longer.
func quote(v string) string {
	if len(v) <= maxQuoted {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q... (%d bytes)", v[:maxQuoted], len(v))
}

// cniNameRule is the rule libcni applies to network names and container
// IDs, in words.
const cniNameRule = "must be a letter or digit followed by letters, digits, '_', '.' or '-' (the CNI rule)"

// ValidateNetworkName applies CNI's rule for a network name (libcni's
// utils.ValidateNetworkName) and a bound of MaxNetworkNameLen.
func ValidateNetworkName(name string) error {
	return cniRule("network name", name, MaxNetworkNameLen, cniNameRule, utils.ValidateNetworkName)
}

// ValidateContainerID applies CNI's rule for a container ID (libcni's
// utils.ValidateContainerID, the network name's characters) and a bound of
// MaxContainerIDLen.
func ValidateContainerID(id string) error {
	return cniRule("container ID", id, MaxContainerIDLen, cniNameRule, utils.ValidateContainerID)
}

// ValidateIfName applies CNI's rule for the interface name in the pod
// (libcni's utils.ValidateInterfaceName, the kernel's rules) and requires
// UTF-8 without control characters, which libcni lets through: the kernel
// ends a name at a NUL (the pod would get "eth" where the key says
// "eth\x000"), the checkpoint's JSON turns invalid UTF-8 into U+FFFD (after
// a restart the key would no longer match the runtime's), and control
// characters corrupt logs.
func ValidateIfName(name string) error {
	if err := cniRule("interface name", name, MaxIfNameLen,
		"must be 1-15 bytes, not \".\" or \"..\", without '/', ':' or white space (the kernel's rule)",
		utils.ValidateInterfaceName); err != nil {
		return err
	}
	return ifNameText(name)
}

// ifNameText is the part of the interface name rule libcni does not check.
func ifNameText(name string) error {
	if !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return &FieldError{Field: "interface name", Value: name, Rule: "must be UTF-8 without control characters"}
	}
	return nil
}

// cniRule applies libcni's check to v after a bound on its length: libcni
// bounds only the interface name, and there is no point scanning a
// megabyte that the length alone refuses. rule says in words what libcni's
// check requires, since its own messages do not say what is allowed.
func cniRule(field, v string, maxLen int, rule string, check func(string) *types.Error) error {
	switch {
	case v == "":
		return &FieldError{Field: field, Value: v, Rule: "is empty"}
	case len(v) > maxLen:
		return &FieldError{Field: field, Value: v, Rule: fmt.Sprintf("is longer than %d bytes", maxLen)}
	}
	if err := check(v); err != nil {
		return &FieldError{Field: field, Value: v, Rule: rule}
	}
	return nil
}

// ValidateAttachment checks the three parts of the key CNI identifies an
// attachment by. Both the plugin, before it asks for an address, and the
// agent, before it records one, call it, so a key one accepts the other
// does too.
func ValidateAttachment(network, containerID, ifName string) error {
	return join(ValidateNetworkName(network), ValidateContainerID(containerID), ValidateIfName(ifName))
}

// Kubernetes' name rules (k8s.io/apimachinery/pkg/util/validation
// IsDNS1123Label and IsDNS1123Subdomain), written out here rather than
// imported: the agent calls ValidatePod and must not depend on any
// k8s.io package (agent/deps_test.go), and that package brings klog. A
// test checks these against Kubernetes' own on every case and fuzz input.
var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

const (
	labelRule     = "must be a DNS-1123 label (Kubernetes' rule for a namespace): lower-case letters, digits and '-', starting and ending with a letter or digit"
	subdomainRule = "must be a DNS-1123 subdomain (Kubernetes' rule for a pod name): DNS-1123 labels of lower-case letters, digits and '-' joined by '.'"
)

// ValidatePodNamespace applies Kubernetes' rule for a namespace name: a
// DNS-1123 label of at most 63 bytes.
func ValidatePodNamespace(namespace string) error {
	return k8sRule("pod namespace", namespace, MaxPodNamespaceLen, labelRule, dns1123Label)
}

// ValidatePodName applies Kubernetes' rule for a pod name: a DNS-1123
// subdomain of at most 253 bytes.
func ValidatePodName(name string) error {
	return k8sRule("pod name", name, MaxPodNameLen, subdomainRule, dns1123Subdomain)
}

// ValidatePod checks the pod identity the runtime passes (CNI_ARGS
// K8S_POD_NAMESPACE and K8S_POD_NAME). Kubernetes never creates a pod that
// fails it, so a failure means a runtime bug or a forged call; the names
// reach the host veth's name, logs, Events and the checkpoint.
func ValidatePod(namespace, name string) error {
	return join(ValidatePodNamespace(namespace), ValidatePodName(name))
}

func k8sRule(field, v string, maxLen int, rule string, re *regexp.Regexp) error {
	switch {
	case v == "":
		return &FieldError{Field: field, Value: v, Rule: "is empty"}
	case len(v) > maxLen:
		return &FieldError{Field: field, Value: v, Rule: fmt.Sprintf("is longer than %d bytes (Kubernetes' limit)", maxLen)}
	case !re.MatchString(v):
		return &FieldError{Field: field, Value: v, Rule: rule}
	}
	return nil
}

// Errors is every rule a set of values breaks, one FieldError each.
type Errors []error

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	// One line: these end up in CNI errors and log lines.
	return strings.Join(msgs, "; ")
}

func (e Errors) Unwrap() []error { return e }

// join returns nil, the only error, or Errors of all of them.
func join(errs ...error) error {
	var out Errors
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}
