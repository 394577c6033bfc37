package dataplane

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

var egressSNATTo = EgressSNAT{NodeIP: netip.MustParseAddr("10.0.0.10")}

func egressNFT(t *testing.T, n ns.NetNS) *nftConn {
	t.Helper()
	c, err := newNFT(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

// egressState is the SNAT chain's rule count and the set's elements as
// "addr owner".
func egressState(t *testing.T, n ns.NetNS) (int, []string) {
	t.Helper()
	c := egressNFT(t, n)
	tbl, err := c.table(nftables.TableFamilyIPv4, EgressV4Table)
	if err != nil || tbl == nil {
		t.Fatalf("table ip %s: %v, %v", EgressV4Table, tbl, err)
	}
	rules := 0
	forEachRule(t, n, EgressV4Table, func(*nftables.Chain, *nftables.Rule) { rules++ })
	_, elems, err := egressElements(c, tbl)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range elems {
		out = append(out, keyAddr(e).String()+" "+e.Comment)
	}
	slices.Sort(out)
	return rules, out
}

// Plugins run ADD for many pods at once, each its own process with no
// lock between them: every transaction ends with the one rule and all
// pods' elements.
func TestConcurrentEgressAddsLeaveOneRuleAndEveryPod(t *testing.T) {
	n := netnstest.NewNS(t)
	const pods = 16
	var wg sync.WaitGroup
	errs := make(chan error, pods)
	for i := range pods {
		wg.Go(func() {
			c, err := newNFT(n)
			if err != nil {
				errs <- err
				return
			}
			defer c.close()
			errs <- addEgressSNAT(c, egressSNATTo, netip.AddrFrom4([4]byte{169, 254, 172, byte(2 + i)}), fmt.Sprintf("pod%d", i))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rules, elems := egressState(t, n)
	if rules != 1 || len(elems) != pods {
		t.Errorf("%d rules and %d elements %v, want 1 rule and %d elements", rules, len(elems), elems, pods)
	}
	if p, err := checkEgressSNAT(egressNFT(t, n), egressSNATTo, netip.MustParseAddr("169.254.172.2")); err != nil || len(p) > 0 {
		t.Errorf("check: %v %v", p, err)
	}
}

// An element left by an attachment whose DEL never came is taken over by
// the attachment IPAM gave the address to, so that attachment's DEL
// finds it by its comment.
func TestEgressAddTakesOverAStaleElementAndDelFindsItByOwner(t *testing.T) {
	n := netnstest.NewNS(t)
	c := egressNFT(t, n)
	addr := netip.MustParseAddr("169.254.172.9")
	for _, owner := range []string{"vpcnet/old/eth0", "vpcnet/new/eth0"} {
		if err := addEgressSNAT(c, egressSNATTo, addr, owner); err != nil {
			t.Fatal(err)
		}
	}
	if _, elems := egressState(t, n); !slices.Equal(elems, []string{"169.254.172.9 vpcnet/new/eth0"}) {
		t.Errorf("elements %v, want the address under its new owner", elems)
	}
	removed, err := delEgressSNAT(c, nil, "vpcnet/new/eth0")
	if err != nil || !slices.Equal(removed, []netip.Addr{addr}) {
		t.Errorf("delete by owner removed %v, %v; want %s", removed, err, addr)
	}
	if removed, err := delEgressSNAT(c, []netip.Addr{addr}, "vpcnet/new/eth0"); err != nil || len(removed) != 0 {
		t.Errorf("second delete removed %v, %v; want nothing", removed, err)
	}
}

// The rule as nft prints it: aws-node's SNAT target and port modes, with
// multicast left alone.
func TestEgressRuleAsNftPrintsIt(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft command")
	}
	for ports, want := range map[SNATPorts]string{
		"":                  "snat to 10.0.0.10 fully-random",
		SNATPortsRandom:     "snat to 10.0.0.10 random",
		SNATPortsSequential: "snat to 10.0.0.10 comment",
	} {
		n := netnstest.NewNS(t)
		snat := egressSNATTo
		snat.Ports = ports
		if err := addEgressSNAT(egressNFT(t, n), snat, netip.MustParseAddr("169.254.172.2"), "vpcnet/c/eth0"); err != nil {
			t.Fatal(err)
		}
		var out []byte
		netnstest.Do(t, n, func() error {
			var err error
			out, err = exec.Command("nft", "list", "table", "ip", EgressV4Table).CombinedOutput()
			return err
		})
		for _, w := range []string{"type nat hook postrouting priority srcnat; policy accept;",
			"ip saddr @pods ip daddr != 224.0.0.0/4 " + want} {
			if !strings.Contains(string(out), w) {
				t.Errorf("randomizeSNAT %q: nft lists\n%s\nwithout %q", ports, out, w)
			}
		}
	}
}

// GC removes an attachment's element only once its address is released:
// one whose release fails stays for the next GC to find. Attachments of
// other networks, and those kept, are left alone.
func TestEgressGCKeepsWhatItCouldNotRelease(t *testing.T) {
	n := netnstest.NewNS(t)
	c := egressNFT(t, n)
	for i, owner := range []string{"vpcnet/kept/eth0", "vpcnet/gone/eth0", "vpcnet/stuck/eth0", "other/gone/eth0"} {
		if err := addEgressSNAT(c, egressSNATTo, netip.AddrFrom4([4]byte{169, 254, 172, byte(2 + i)}), owner); err != nil {
			t.Fatal(err)
		}
	}
	d, err := New(Options{NetNS: n.Path()})
	if err != nil {
		t.Fatal(err)
	}
	var released []string
	owners, err := d.GCEgressV4(t.Context(), "vpcnet",
		func(o string) bool { return o == "vpcnet/kept/eth0" },
		func(o string) error {
			if o == "vpcnet/stuck/eth0" {
				return fmt.Errorf("IPAM unreachable")
			}
			released = append(released, o)
			return nil
		})
	if err == nil || !strings.Contains(err.Error(), "vpcnet/stuck/eth0: IPAM unreachable") {
		t.Errorf("GC error %v, want the failed release named", err)
	}
	if !slices.Equal(owners, []string{"vpcnet/gone/eth0"}) || !slices.Equal(released, owners) {
		t.Errorf("GC removed %v and released %v, want vpcnet/gone/eth0 alone", owners, released)
	}
	want := []string{"169.254.172.2 vpcnet/kept/eth0", "169.254.172.4 vpcnet/stuck/eth0", "169.254.172.5 other/gone/eth0"}
	if _, elems := egressState(t, n); !slices.Equal(elems, want) {
		t.Errorf("elements after GC %v, want %v", elems, want)
	}
}
