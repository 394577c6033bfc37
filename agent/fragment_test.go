package agent

import (
	"context"
	"testing"
)

// A /26 whose two middle /28s each hold one address of another instance:
// 56 addresses free, no free /28. With prefix delegation the agent is
// refused a prefix (InsufficientCidrBlocks), says subnet_fragmented with
// the free count, and gives pods single secondary addresses.
const fragmentedTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-f, az: us-west-2a, cidr: 10.0.0.0/26}]
securityGroups: [sg-0sim]
instances:
- {id: i-node, type: m5.large, subnet: subnet-f, privateIp: 10.0.0.4}
- {id: i-other1, type: m5.large, subnet: subnet-f, privateIp: 10.0.0.24}
- {id: i-other2, type: m5.large, subnet: subnet-f, privateIp: 10.0.0.40}
attachDelay: 20ms
imdsLag: 0s
seed: 1
`

func TestFragmentedSubnetStillStartsPods(t *testing.T) {
	w := newWorldOf(t, fragmentedTopology)
	if n, err := w.cloud.FreePrefixes("subnet-f"); err != nil || n != 0 {
		t.Fatalf("the topology leaves %d free /28s (%v), want 0", n, err)
	}
	a := w.node("i-node", map[string]string{"ENABLE_PREFIX_DELEGATION": "true"}).start(t)
	a.waitReady(t)
	ctx := context.Background()
	for i := range 5 {
		as, err := a.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatalf("pod %d on a fragmented subnet: %v", i, err)
		}
		if as.Block.Bits() != 32 {
			t.Errorf("pod %d got %s from block %s, want a single secondary address", i, as.Addr, as.Block)
		}
	}
	st := a.statusView(ctx).(statusView)
	f := st.PrefixFallback
	if f == nil {
		t.Fatalf("/v1/status shows no prefix fallback; last EC2 error %q", st.LastEC2Error)
	}
	if f.Reason != ReasonSubnetFragmented || f.SubnetID != "subnet-f" || f.FreeAddresses < 16 || f.Fix == "" {
		t.Errorf("/v1/status prefixFallback = %+v, want subnet_fragmented in subnet-f with its free count (at least 16) and the fix", f)
	}
	mfs, err := a.met.gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "vpcnet_prefix_fallback" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			found = found || (labels["reason"] == ReasonSubnetFragmented && labels["subnet"] == "subnet-f" && m.GetGauge().GetValue() == 1)
		}
	}
	if !found {
		t.Error("no vpcnet_prefix_fallback{reason=subnet_fragmented,subnet=subnet-f} 1")
	}
}
