package ipam

import (
	"strings"
	"testing"
	"time"
)

func warmIP(n int) func(*PlanConfig)          { return func(c *PlanConfig) { c.WarmIPTarget = n } }
func minIP(n int) func(*PlanConfig)           { return func(c *PlanConfig) { c.MinimumIPTarget = n } }
func warmENI(n int) func(*PlanConfig)         { return func(c *PlanConfig) { c.WarmENITarget = n } }
func warmPfx(n int) func(*PlanConfig)         { return func(c *PlanConfig) { c.WarmPrefixTarget = n } }
func maxENI(n int) func(*PlanConfig)          { return func(c *PlanConfig) { c.MaxENI = n } }
func maxPods(n int) func(*PlanConfig)         { return func(c *PlanConfig) { c.MaxPods = n } }
func prefixMode(c *PlanConfig)                { c.PrefixDelegation = true }
func customNetworking(c *PlanConfig)          { c.CustomNetworking = true }
func grace(d time.Duration) func(*PlanConfig) { return func(c *PlanConfig) { c.ENIGracePeriod = d } }

// Every case runs on m5large (3 ENIs, 10 IPv4 addresses per ENI) unless
// it says otherwise; old is an ENI age past the default grace period.
const old = time.Hour

func TestPlanOnePass(t *testing.T) {
	tests := []struct {
		name  string
		cfg   PlanConfig
		lim   Limits
		snap  Snapshot
		want  []string
		limit Limit // shortfall's limit, NoLimit for none
	}{
		// WARM_IP_TARGET / MINIMUM_IP_TARGET: short = max(warm − available, minimum − total).
		{"warm ip 5 with 0 available is short 5", testConfig(warmIP(5)), m5large,
			snap(0, eniAt(0, old, addrs(4, 4, 0))), []string{"assign eni-0 5"}, NoLimit},
		{"warm ip 5 with 2 available is short 3", testConfig(warmIP(5)), m5large,
			snap(0, eniAt(0, old, addrs(6, 4, 0))), []string{"assign eni-0 3"}, NoLimit},
		{"warm ip 5 with 5 available needs nothing", testConfig(warmIP(5)), m5large,
			snap(0, eniAt(0, old, addrs(9, 4, 0))), []string{}, NoLimit},
		{"cooling addresses are not available", testConfig(warmIP(5)), m5large,
			snap(0, eniAt(0, old, addrs(9, 4, 3))), []string{"attach 3"}, NoLimit},
		{"warm ip short on a full primary attaches exactly the shortfall", testConfig(warmIP(5)), m5large,
			snap(0, eniAt(0, old, addrs(9, 9, 0))), []string{"attach 5"}, NoLimit},
		{"minimum ip 16 on an idle node fills the primary then attaches 7", testConfig(minIP(16)), m5large,
			snap(0, eniAt(0, old, addrs(0, 0, 0))), []string{"assign eni-0 9", "attach 7"}, NoLimit},
		{"waiting requests add to the warm target", testConfig(warmIP(2)), m5large,
			snap(3, eniAt(0, old, addrs(9, 7, 0))), []string{"attach 3"}, NoLimit},
		{"waiting requests grow the pool even when the minimum is met", testConfig(minIP(9)), m5large,
			snap(2, eniAt(0, old, addrs(9, 9, 0))), []string{"attach 2"}, NoLimit},

		// WARM_ENI_TARGET: keep WARM_ENI_TARGET × 9 available, fill whole ENIs.
		// An idle node keeps only its full primary ENI: its 9 free addresses
		// are the warm ENI's worth. This is aws-node's isDatastorePoolTooLow
		// (available < WARM_ENI_TARGET × addresses per ENI) and its
		// docs/eni-and-ip-target.md table (t3.small, 0 pods: 1 ENI); the
		// second ENI comes with the first pod.
		{"defaults on an idle node fill the primary ENI only", testConfig(), m5large,
			snap(0, eniAt(0, old, addrs(0, 0, 0))), []string{"assign eni-0 9"}, NoLimit},
		{"defaults with one pod attach a whole warm ENI", testConfig(), m5large,
			snap(0, eniAt(0, old, addrs(9, 1, 0))), []string{"attach 9"}, NoLimit},
		{"warm eni fills a partly filled ENI to capacity", testConfig(), m5large,
			snap(0, eniAt(0, old, addrs(5, 5, 0))), []string{"assign eni-0 4", "attach 9"}, NoLimit},
		// WARM_ENI_TARGET=0 keeps no free ENI, but still grows once no
		// address at all is available, pod waiting or not: aws-node's
		// isDatastorePoolTooLow (warmTarget == 0 && available == 0), and
		// its new ENI comes with all its addresses
		// (GetENIResourcesToAllocate). The agent asks the budget for that
		// ENI as warm-pool work: no pod waits for it.
		{"warm eni 0 keeps nothing more while one address is available", testConfig(warmENI(0)), m5large,
			snap(0, eniAt(0, old, addrs(9, 8, 0))), []string{}, NoLimit},
		{"warm eni 0 attaches a whole ENI once none is available", testConfig(warmENI(0)), m5large,
			snap(0, eniAt(0, old, addrs(9, 9, 0))), []string{"attach 9"}, NoLimit},
		{"warm eni 3 with MAX_ENI 2 stops at 2 ENIs", testConfig(warmENI(3), maxENI(2)), m5large,
			snap(0, eniAt(0, old, addrs(0, 0, 0))), []string{"assign eni-0 9", "attach 9"}, MaxENILimit},
		{"instance ENI limit", testConfig(warmENI(1)), m5large,
			snap(0, eniAt(0, old, addrs(9, 9, 0)), eniAt(1, old, addrs(9, 9, 0)), eniAt(2, old, addrs(9, 5, 0))),
			[]string{}, InstanceENILimit},

		// WARM_PREFIX_TARGET, and IP targets counted in prefixes.
		{"prefix mode warm prefix 2 on an idle node", testConfig(prefixMode, warmPfx(2)), m5large,
			snap(0, eniAt(0, old, blk{})), []string{"assign eni-0 2"}, NoLimit},
		{"prefix mode keeps whole prefixes free", testConfig(prefixMode, warmPfx(1)), m5large,
			snap(0, eniAt(0, old, blk{}, prefix(5, 0))), []string{"assign eni-0 1"}, NoLimit},
		{"prefix mode warm ip 5 rounds up to one prefix", testConfig(prefixMode, warmIP(5)), m5large,
			snap(0, eniAt(0, old, blk{})), []string{"assign eni-0 1"}, NoLimit},
		{"prefix mode minimum 20 rounds up to two prefixes", testConfig(prefixMode, warmIP(7), minIP(20)), m5large,
			snap(0, eniAt(0, old, blk{})), []string{"assign eni-0 2"}, NoLimit},
		{"prefix mode attaches a new ENI only when prefixes are exhausted", testConfig(prefixMode, warmPfx(1), maxPods(110)),
			Limits{MaxENIs: 3, IPv4PerENI: 3},
			snap(0, eniAt(0, old, blk{}, prefix(16, 0), prefix(3, 0))), []string{"attach 1"}, NoLimit},

		// Max pods: the pool never holds more than max pods can use.
		{"max pods caps growth", testConfig(minIP(16), maxPods(12)), m5large,
			snap(0, eniAt(0, old, addrs(0, 0, 0))), []string{"assign eni-0 9", "attach 3"}, MaxPodsLimit},
		{"max pods caps prefixes", testConfig(prefixMode, warmPfx(3), maxPods(20)), m5large,
			snap(0, eniAt(0, old, blk{})), []string{"assign eni-0 2"}, MaxPodsLimit},
		{"derived max pods does not bind on m5.large", testConfig(warmENI(5)), m5large,
			snap(0, eniAt(0, old, addrs(0, 0, 0))), []string{"assign eni-0 9", "attach 9", "attach 9"}, InstanceENILimit},

		// Custom networking: pods never use the primary ENI.
		{"custom networking leaves the primary ENI alone", testConfig(customNetworking), m5large,
			snap(0, eniAt(0, old, addrs(0, 0, 0))), []string{"attach 9"}, NoLimit},

		// Releases.
		{"release only free addresses, highest device first", testConfig(warmIP(2)), m5large,
			snap(0, eniAt(0, old, addrs(9, 2, 2)), eniAt(1, old, addrs(6, 1, 1))),
			[]string{"release eni-1 4", "release eni-0 3"}, NoLimit},
		{"release keeps the minimum", testConfig(warmIP(1), minIP(10)), m5large,
			snap(0, eniAt(0, old, addrs(9, 2, 0)), eniAt(1, old, addrs(5, 0, 0))),
			[]string{"release eni-1 4"}, NoLimit},
		{"an ENI with a cooling address stays attached", testConfig(warmIP(1)), m5large,
			snap(0, eniAt(0, old, addrs(9, 8, 0)), eniAt(1, old, addrs(9, 0, 1))),
			[]string{"release eni-1 8"}, NoLimit},
		{"a whole free ENI is detached rather than spread releases", testConfig(warmIP(9)), m5large,
			snap(0, eniAt(0, old, addrs(9, 0, 0)), eniAt(1, old, addrs(9, 0, 0))),
			[]string{"detach eni-1"}, NoLimit},
		{"an ENI younger than the grace period stays", testConfig(warmIP(9)), m5large,
			snap(0, eniAt(0, old, addrs(9, 0, 0)), eniAt(1, 30*time.Second, addrs(9, 0, 0))),
			[]string{"release eni-1 9"}, NoLimit},
		{"the grace period is configurable", testConfig(warmIP(9), grace(10*time.Second)), m5large,
			snap(0, eniAt(0, old, addrs(9, 0, 0)), eniAt(1, 30*time.Second, addrs(9, 0, 0))),
			[]string{"detach eni-1"}, NoLimit},
		{"the primary ENI is never detached", testConfig(minIP(1)), m5large,
			snap(0, eniAt(0, old, addrs(9, 0, 0))), []string{"release eni-0 8"}, NoLimit},
		{"warm eni detaches a free ENI the target does not need", testConfig(), m5large,
			snap(0, eniAt(0, old, addrs(9, 0, 0)), eniAt(1, old, addrs(9, 0, 0))),
			[]string{"detach eni-1"}, NoLimit},
		{"warm eni never releases single addresses", testConfig(), m5large,
			snap(0, eniAt(0, old, addrs(9, 1, 0)), eniAt(1, old, addrs(9, 1, 0))), []string{}, NoLimit},
		{"warm eni keeps an ENI the target needs", testConfig(), m5large,
			snap(0, eniAt(0, old, addrs(9, 9, 0)), eniAt(1, old, addrs(9, 0, 0))), []string{}, NoLimit},
		{"an empty ENI is detached", testConfig(warmIP(4)), m5large,
			snap(0, eniAt(0, old, addrs(9, 5, 0)), eniAt(1, old, blk{})), []string{"detach eni-1"}, NoLimit},
		{"prefix mode releases free prefixes over the target", testConfig(prefixMode, warmPfx(1)), m5large,
			snap(0, eniAt(0, old, blk{}, prefix(3, 0), prefix(0, 0), prefix(0, 0), prefix(0, 2))),
			[]string{"release eni-0 1"}, NoLimit},
		{"prefix mode keeps a prefix with a cooling address", testConfig(prefixMode, warmIP(1)), m5large,
			snap(0, eniAt(0, old, blk{}, prefix(3, 0), prefix(0, 1))), []string{}, NoLimit},

		// Blocks left from the other mode.
		{"turning prefix delegation on gives back unused secondary addresses", testConfig(prefixMode, warmPfx(1)), m5large,
			snap(0, eniAt(0, old, addrs(9, 2, 1))), []string{"release eni-0 6", "assign eni-0 1"}, NoLimit},
		{"turning prefix delegation off gives back unused prefixes", testConfig(warmIP(1)), m5large,
			snap(0, eniAt(0, old, addrs(2, 0, 0), prefix(0, 0), prefix(4, 0))), []string{"release eni-0 1", "release eni-0 2"}, NoLimit},
		{"a leftover prefix in use still serves pods", testConfig(warmIP(5)), m5large,
			snap(0, eniAt(0, old, addrs(0, 0, 0), prefix(4, 0))), []string{}, NoLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actions, short := Plan(tt.snap, tt.cfg, tt.lim, t0)
			if got := brief(actions); !eq(got, tt.want) {
				t.Errorf("actions = %q, want %q\n%s", got, tt.want, dump(actions))
			}
			if short.Limit != tt.limit {
				t.Errorf("shortfall = %v, want limit %v", short, tt.limit)
			}
			for _, a := range actions {
				if a.Reason == "" {
					t.Errorf("%s has no reason", a)
				}
			}
		})
	}
}

func dump(actions []Action) string {
	var b strings.Builder
	for _, a := range actions {
		b.WriteString("  " + a.String() + "\n")
	}
	return b.String()
}
