package dataplane

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// wantHostTable is what `nft list table ip vpcnet` prints for
// hostConfig(): the nftables form of aws-node's SNAT and connmark rules.
const wantHostTable = `table ip vpcnet {
	chain mangle-prerouting {
		type filter hook prerouting priority mangle; policy accept;
		iifname "eth0" fib daddr . iif type local ct mark set ct mark | 0x00000080 comment "vpcnet: mark connections to the node entering on eth0"
		iifname "eni*" ct mark & 0x00000080 == 0x00000000 meta mark set meta mark & 0xffffff7f comment "vpcnet: restore mark 0x80: clear on replies from pods"
		iifname "eni*" ct mark & 0x00000080 == 0x00000080 meta mark set meta mark | 0x00000080 comment "vpcnet: restore mark 0x80: set on replies from pods"
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat + 10; policy accept;
		fib daddr type local return comment "vpcnet: node-local destinations are not SNAT-marked"
		iifname "eni*" jump snat-mark comment "vpcnet: pod connections may need SNAT"
		ct mark & 0x00000080 == 0x00000000 meta mark set meta mark & 0xffffff7f comment "vpcnet: restore mark 0x80: clear on first packet of SNAT connections"
		ct mark & 0x00000080 == 0x00000080 meta mark set meta mark | 0x00000080 comment "vpcnet: restore mark 0x80: set on first packet of SNAT connections"
	}

	chain snat-mark {
		ip daddr 10.0.0.0/16 return comment "vpcnet: VPC CIDR 10.0.0.0/16 needs no SNAT"
		ct mark set ct mark | 0x00000080 comment "vpcnet: pod connection leaving the VPC: SNAT it and route it via the primary interface"
	}

	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip daddr 10.0.0.0/16 return comment "vpcnet: VPC CIDR 10.0.0.0/16 is not SNATed"
		ct mark & 0x00000080 == 0x00000080 snat to 10.0.0.10 fully-random comment "vpcnet: SNAT pod traffic leaving the VPC to 10.0.0.10"
	}
}`

func TestSetupHostConfiguresTheNode(t *testing.T) {
	n := newTestNode(t)
	if err := n.dp.SetupHost(testContext(t), n.hostConfig()); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "rules", rulesIn(t, n.node), []string{"1024: from all fwmark 0x80/0x80 lookup main"})
	netnstest.Do(t, n.node, func() error {
		for name, want := range map[string]string{"net.ipv4.ip_forward": "1", "net.ipv4.conf.eth0.rp_filter": "2"} {
			if got, err := sysctl.Sysctl(name); err != nil || got != want {
				t.Errorf("sysctl %s = %q (%v), want %q", name, got, err, want)
			}
		}
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if l.Attrs().MTU != 9001 {
			t.Errorf("eth0 MTU = %d, want 9001", l.Attrs().MTU)
		}
		return nil
	})
	if got := nftList(t, n.node); got != wantHostTable {
		t.Errorf("nft list table ip vpcnet:\n%s\nwant:\n%s", got, wantHostTable)
	}
}

func TestRandomizeSNATChoosesTheSNATPortMode(t *testing.T) {
	for _, tt := range []struct {
		ports SNATPorts
		want  string
	}{
		{"", "snat to 10.0.0.10 fully-random"},
		{SNATPortsFullyRandom, "snat to 10.0.0.10 fully-random"},
		{SNATPortsRandom, "snat to 10.0.0.10 random"},
		{SNATPortsSequential, "snat to 10.0.0.10 comment"},
	} {
		t.Run(string(tt.ports), func(t *testing.T) {
			n := newTestNode(t)
			cfg := n.hostConfig()
			cfg.SNATPorts = tt.ports
			if err := n.dp.SetupHost(testContext(t), cfg); err != nil {
				t.Fatal(err)
			}
			if got := nftList(t, n.node); !strings.Contains(got, tt.want) {
				t.Errorf("AWS_VPC_K8S_CNI_RANDOMIZESNAT=%q: table has no %q:\n%s", tt.ports, tt.want, got)
			}
		})
	}
	n := newTestNode(t)
	cfg := n.hostConfig()
	cfg.SNATPorts = "sometimes"
	if err := n.dp.SetupHost(testContext(t), cfg); err == nil || !strings.Contains(err.Error(), "prng, hashrandom or none") {
		t.Errorf("SetupHost with SNAT port mode \"sometimes\" = %v, want an error naming the choices", err)
	}
}

func TestSetupHostTwiceChangesNothing(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	if err := n.dp.SetupHost(ctx, n.hostConfig()); err != nil {
		t.Fatal(err)
	}
	rules, table := rulesIn(t, n.node), nftState(t, n.node)
	if err := n.dp.SetupHost(ctx, n.hostConfig()); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "rules after the second run", rulesIn(t, n.node), rules)
	// Rule handles included: a rewrite would give new ones.
	diffLines(t, "nftables after the second run", nftState(t, n.node), table)
}

func TestSetupHostConvergesOnChangedSettings(t *testing.T) {
	base := func(n *testNode) HostConfig { return n.hostConfig() }
	tests := []struct {
		name      string
		change    func(*HostConfig)
		wantRules []string
		wantNFT   []string // chain: comment, in order
	}{
		{
			name: "new VPC CIDR and an excluded CIDR",
			change: func(c *HostConfig) {
				c.VPCCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")}
				c.ExcludeSNATCIDRs = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24")}
			},
			wantRules: []string{"1024: from all fwmark 0x80/0x80 lookup main"},
			wantNFT: []string{
				"mangle-prerouting: mark connections to the node entering on eth0",
				"mangle-prerouting: restore mark 0x80: clear on replies from pods",
				"mangle-prerouting: restore mark 0x80: set on replies from pods",
				"nat-prerouting: node-local destinations are not SNAT-marked",
				"nat-prerouting: pod connections may need SNAT",
				"nat-prerouting: restore mark 0x80: clear on first packet of SNAT connections",
				"nat-prerouting: restore mark 0x80: set on first packet of SNAT connections",
				"snat-mark: VPC CIDR 10.0.0.0/16 needs no SNAT",
				"snat-mark: VPC CIDR 100.64.0.0/16 needs no SNAT",
				"snat-mark: excluded CIDR 192.168.0.0/24 needs no SNAT",
				"snat-mark: pod connection leaving the VPC: SNAT it and route it via the primary interface",
				"nat-postrouting: VPC CIDR 10.0.0.0/16 is not SNATed",
				"nat-postrouting: VPC CIDR 100.64.0.0/16 is not SNATed",
				"nat-postrouting: excluded CIDR 192.168.0.0/24 is not SNATed",
				"nat-postrouting: SNAT pod traffic leaving the VPC to 10.0.0.10",
			},
		},
		{
			name:      "external SNAT keeps only the primary-interface connmark",
			change:    func(c *HostConfig) { c.ExternalSNAT = true },
			wantRules: []string{"1024: from all fwmark 0x80/0x80 lookup main"},
			wantNFT: []string{
				"mangle-prerouting: mark connections to the node entering on eth0",
				"mangle-prerouting: restore mark 0x80: clear on replies from pods",
				"mangle-prerouting: restore mark 0x80: set on replies from pods",
			},
		},
		{
			name:      "new connmark replaces rule 1024",
			change:    func(c *HostConfig) { c.Connmark = 0x4000; c.ExternalSNAT = true },
			wantRules: []string{"1024: from all fwmark 0x4000/0x4000 lookup main"},
			wantNFT: []string{
				"mangle-prerouting: mark connections to the node entering on eth0",
				"mangle-prerouting: restore mark 0x4000: clear on replies from pods",
				"mangle-prerouting: restore mark 0x4000: set on replies from pods",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			ctx := testContext(t)
			if err := n.dp.SetupHost(ctx, base(n)); err != nil {
				t.Fatal(err)
			}
			cfg := base(n)
			tt.change(&cfg)
			if err := n.dp.SetupHost(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			diffLines(t, "rules", rulesIn(t, n.node), tt.wantRules)
			diffLines(t, "nftables rules", nftComments(t, n.node), tt.wantNFT)
		})
	}
}

func TestSetupHostLeavesOtherTablesAlone(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	foreign := addForeignTable(t, n.node)
	if err := n.dp.SetupHost(ctx, n.hostConfig()); err != nil {
		t.Fatal(err)
	}
	cfg := n.hostConfig()
	cfg.ExternalSNAT = true
	if err := n.dp.SetupHost(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := n.dp.TeardownHost(ctx); err != nil {
		t.Fatal(err)
	}
	if got := foreignRuleHandles(t, n.node); got != foreign {
		t.Errorf("foreign table changed: rule handles %q, want %q", got, foreign)
	}
}

func TestTeardownHostRemovesOurTableAndRule(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	if err := n.dp.SetupHost(ctx, n.hostConfig()); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run finds nothing to do
		if err := n.dp.TeardownHost(ctx); err != nil {
			t.Fatal(err)
		}
	}
	diffLines(t, "rules", rulesIn(t, n.node), nil)
	if got := nftComments(t, n.node); len(got) != 0 {
		t.Errorf("table ip vpcnet still has rules: %q", got)
	}
}

func TestSetupHostRejectsInvalidConfig(t *testing.T) {
	good := HostConfig{PrimaryInterface: "eth0", PrimaryIP: netip.MustParseAddr("10.0.0.10"), VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}}
	tests := []struct {
		name   string
		change func(*HostConfig)
		want   string
	}{
		{"no primary interface", func(c *HostConfig) { c.PrimaryInterface = "" }, "neither the primary ENI's MAC"},
		{"IPv6 primary IP", func(c *HostConfig) { c.PrimaryIP = netip.MustParseAddr("fd00::1") }, "not an IPv4 address"},
		{"no VPC CIDR", func(c *HostConfig) { c.VPCCIDRs = nil }, "no VPC CIDR"},
		{"IPv6 excluded CIDR", func(c *HostConfig) { c.ExcludeSNATCIDRs = []netip.Prefix{netip.MustParsePrefix("fd00::/64")} }, `"fd00::/64" is not an IPv4 CIDR`},
		{"MTU too large", func(c *HostConfig) { c.MTU = 9500 }, "MTU 9500 is outside"},
	}
	dp, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.change(&cfg)
			err := dp.SetupHost(t.Context(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("SetupHost error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// nftComments lists "chain: comment" for every rule of table ip vpcnet,
// read with the nftables library.
func nftComments(t *testing.T, n ns.NetNS) []string {
	t.Helper()
	var out []string
	forEachRule(t, n, TableName, func(c *nftables.Chain, r *nftables.Rule) {
		comment, ok := userdata.GetString(r.UserData, userdata.TypeComment)
		if !ok || !strings.HasPrefix(comment, ownerComment) {
			t.Errorf("rule %d in chain %s has no owner comment: %q", r.Handle, c.Name, comment)
		}
		out = append(out, c.Name+": "+strings.TrimPrefix(comment, ownerComment))
	})
	return out
}

// nftState is `nft -a list table ip vpcnet`: the rules with their handles.
func nftState(t *testing.T, n ns.NetNS) []string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft CLI not installed (apt-get install nftables)")
	}
	var out []byte
	netnstest.Do(t, n, func() error {
		var err error
		out, err = exec.Command("nft", "-a", "list", "table", "ip", TableName).CombinedOutput()
		return err
	})
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func forEachRule(t *testing.T, n ns.NetNS, table string, f func(*nftables.Chain, *nftables.Rule)) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(n.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range chains {
		if ch.Table.Name != table {
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			f(ch, r)
		}
	}
}

// addForeignTable writes another component's table with a rule and
// returns its rule handles.
func addForeignTable(t *testing.T, n ns.NetNS) string {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(n.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "kube-proxy"})
	ch := c.AddChain(&nftables.Chain{
		Name: "postrouting", Table: tbl, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource,
	})
	c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{&expr.Masq{}}})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return foreignRuleHandles(t, n)
}

func foreignRuleHandles(t *testing.T, n ns.NetNS) string {
	t.Helper()
	var handles []string
	forEachRule(t, n, "kube-proxy", func(c *nftables.Chain, r *nftables.Rule) {
		handles = append(handles, fmt.Sprintf("%s/%d", c.Name, r.Handle))
	})
	return strings.Join(handles, ",")
}

func TestDenyPodIMDSAddsDropChainsAndAllowRemovesThem(t *testing.T) {
	n := newTestNode(t)
	cfg := n.hostConfig()
	cfg.DenyPodIMDS = true
	if err := n.dp.SetupHost(testContext(t), cfg); err != nil {
		t.Fatal(err)
	}
	wantV4 := `	chain pod-imds {
		type filter hook prerouting priority raw; policy accept;
		iifname "eni*" ip daddr 169.254.169.254 drop comment "vpcnet: VPCNET_POD_IMDS=deny: drop pod packets to IMDS at 169.254.169.254"
	}`
	if got := nftList(t, n.node); !strings.Contains(got, wantV4) {
		t.Errorf("nft list table ip vpcnet:\n%s\nlacks:\n%s", got, wantV4)
	}
	wantV6 := `table ip6 vpcnet {
	chain pod-imds {
		type filter hook prerouting priority raw; policy accept;
		iifname "eni*" ip6 daddr fd00:ec2::254 drop comment "vpcnet: VPCNET_POD_IMDS=deny: drop pod packets to IMDS at fd00:ec2::254"
	}
}`
	if got := nftListFamily(t, n.node, "ip6"); got != wantV6 {
		t.Errorf("nft list table ip6 vpcnet:\n%s\nwant:\n%s", got, wantV6)
	}
	// Unchanged settings write nothing; allow removes both.
	if err := n.dp.SetupHost(testContext(t), cfg); err != nil {
		t.Fatal(err)
	}
	if err := n.dp.SetupHost(testContext(t), n.hostConfig()); err != nil {
		t.Fatal(err)
	}
	if got := nftList(t, n.node); got != wantHostTable {
		t.Errorf("after allow, nft list table ip vpcnet:\n%s\nwant:\n%s", got, wantHostTable)
	}
	if got := nftListFamily(t, n.node, "ip6"); got != "" {
		t.Errorf("after allow, table ip6 vpcnet remains:\n%s", got)
	}
	cfg.ExternalSNAT = true
	if err := n.dp.SetupHost(testContext(t), cfg); err != nil {
		t.Fatal(err)
	}
	if got := nftList(t, n.node); !strings.Contains(got, wantV4) {
		t.Errorf("with external SNAT, nft list table ip vpcnet:\n%s\nlacks the IMDS chain", got)
	}
	if err := n.dp.TeardownHost(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := nftListFamily(t, n.node, "ip6"); got != "" {
		t.Errorf("after teardown, table ip6 vpcnet remains:\n%s", got)
	}
}
