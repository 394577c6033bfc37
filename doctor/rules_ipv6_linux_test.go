package doctor

import (
	"testing"

	"github.com/vpcnet/vpcnet/dataplane"
)

func TestDoctorLooksForTheEgressPluginsOwnSNATTable(t *testing.T) {
	if egressV4Table != dataplane.EgressV4Table {
		t.Fatalf("doctor looks for table ip %s, the egress plugin writes %s", egressV4Table, dataplane.EgressV4Table)
	}
}
