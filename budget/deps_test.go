package budget_test

import (
	"testing"

	"github.com/vpcnet/vpcnet/internal/depcheck"
)

// TestDeps keeps the Ledger a pure function of its requests and the time
// it is given: the controller serves it over HTTP and package scale runs
// it in simulated time, both from the outside.
func TestDeps(t *testing.T) {
	depcheck.Check(t, "github.com/vpcnet/vpcnet/budget", depcheck.Rules{
		Deps: map[string]string{
			"net":      "the Ledger answers requests; budgetapi carries them",
			"net/http": "the Ledger answers requests; budgetapi carries them",
			"os/exec":  "the Ledger runs no programs",
		},
		Prefixes: map[string]string{
			"github.com/aws/": "the Ledger schedules EC2 calls; it never makes one",
			"k8s.io/":         "leader election and authorization are the controller's",
		},
		Imports: map[string]string{"os": "no files or environment: the controller reads its settings", "syscall": "no system calls"},
	})
}
