package verdicts_test

import (
	"testing"

	"github.com/vpcnet/vpcnet/internal/depcheck"
)

// TestDeps keeps package verdicts free of the Kubernetes API types: the
// CNI plugin links it (through the dataplane and the settings), and runs
// once per ADD and DEL.
func TestDeps(t *testing.T) {
	depcheck.Check(t, "github.com/vpcnet/vpcnet/verdicts", depcheck.Rules{
		Prefixes: map[string]string{
			"k8s.io/":           "the plugin links this package; the API's types are the compiler's (netpol)",
			"github.com/aws/":   "verdicts have nothing to ask of EC2",
			"go4.org/":          "the dataplane renders prefixes; verdicts only hold them",
			"github.com/google": "nftables is the dataplane's",
		},
		Imports: map[string]string{"os": "no files or process state"},
	})
}
