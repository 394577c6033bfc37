package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTheIPv6ReferenceGivesPodsAnIPv6RangeAndDefaultRoute(t *testing.T) {
	l, err := refConfList6(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Type string `json:"type"`
		IPAM struct {
			Ranges [][]struct{ Subnet string } `json:"ranges"`
			Routes []struct{ Dst string }      `json:"routes"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(l.Plugins[0].Bytes, &conf); err != nil {
		t.Fatal(err)
	}
	if conf.Type != "ptp" || len(conf.IPAM.Ranges) != 1 || conf.IPAM.Ranges[0][0].Subnet != "fd00:64::/80" ||
		len(conf.IPAM.Routes) != 1 || conf.IPAM.Routes[0].Dst != "::/0" {
		t.Fatalf("reference for IPv6 pods: %s", l.Plugins[0].Bytes)
	}
}

// warm6 needs the egress plugin, and the host-local it runs, in --bin:
// the driver says so before it starts anything.
func TestWarm6NamesTheEgressPluginOrHostLocalMissingFromBin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("check() wants root before it looks at the scenarios")
	}
	bin := t.TempDir()
	for _, b := range []string{"vpcnetd", "vpcnet", "portmap", "vpcnet-egress-v4"} {
		if err := os.WriteFile(filepath.Join(bin, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o := options{bin: bin, refBin: bin, n: 1, burst: 1, burstRuns: 1, churn: 1, churnRate: 1}
	todo, err := pick([]string{"warm6"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.check(todo); err == nil || !strings.Contains(err.Error(), "host-local not found in --bin") {
		t.Fatalf("check without host-local in --bin: %v", err)
	}
}

func TestWarm6IsAScenarioOfAPlainRun(t *testing.T) {
	for _, s := range defaultScenarios() {
		if s.name == "warm6" {
			return
		}
	}
	t.Fatal("make bench's default scenarios leave out warm6")
}

// The ratios are each vpcnet arm's against the reference with DAD off,
// and the reference as it is is a row of its own.
func TestWarm6ReportsEachVpcnetArmAgainstTheReference(t *testing.T) {
	arm := func(add, del time.Duration) *cycles {
		c := &cycles{}
		for range 10 {
			c.add, c.del = append(c.add, add), append(c.del, del)
			c.exec, c.delExec = append(c.exec, add/2), append(c.delExec, del/2)
		}
		return c
	}
	ms := time.Millisecond
	res := &Result{}
	(&bench{}).warm6Report(res, arm(30*ms, 40*ms), arm(10*ms, 10*ms), arm(20*ms, 20*ms), arm(2000*ms, 20*ms), arm(15*ms, 25*ms))
	rows := map[string][]string{}
	for _, r := range res.Tables[0].Rows {
		rows[r[0]] = r[1:]
	}
	for name, p50 := range map[string]string{
		"ADD vpcnet egress on / reference":       "1.50×",
		"ADD vpcnet egress off / reference":      "0.50×",
		"DEL vpcnet egress on / reference":       "2.00×",
		"ADD ptp+host-local, DAD on (10 cycles)": "2000",
	} {
		if got := rows[name]; len(got) == 0 || got[0] != p50 {
			t.Errorf("%s: p50 %v, want %s; rows %v", name, got, p50, res.Tables[0].Rows)
		}
	}
	if got := res.Figures["ADD_p50_ratio"]; got != 1.5 {
		t.Errorf("ADD_p50_ratio = %v, want 1.5 (egress on, aws-node's default)", got)
	}
}
