package kubetest

import (
	"strings"
	"testing"
)

func TestNamespacePrefixIsADNSLabelPrefix(t *testing.T) {
	tests := []struct {
		testName string
		want     string
	}{
		{"TestAgent", "testagent-"},
		{"TestAgent/node_by_providerID#01", "testagent-node-by-providerid-01-"},
		{"__/__", "test-"},
		{"Test" + strings.Repeat("x", 80), "test" + strings.Repeat("x", 46) + "-"},
		{"Test" + strings.Repeat("x", 45) + "/y", "test" + strings.Repeat("x", 45) + "-"},
	}
	for _, tt := range tests {
		if got := namespacePrefix(tt.testName); got != tt.want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", tt.testName, got, tt.want)
		}
		// The apiserver appends 5 characters; a label holds 63.
		if got := namespacePrefix(tt.testName); len(got)+5 > 63 {
			t.Errorf("namespacePrefix(%q) = %q leaves no room for the suffix", tt.testName, got)
		}
	}
}
