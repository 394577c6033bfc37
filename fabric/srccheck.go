package fabric

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// The router's IPv6 source/destination check lives in a table of its own
// in the router's namespace, which the fabric alone owns.
const (
	srcCheckTable = "vpcnet-fabric"
	srcCheckChain = "source-check"
	srcCheckOwner = "vpcnet-fabric: EC2 source/destination check"
)

// sourceCheck6 installs EC2's source/destination check for IPv6. Linux's
// rp_filter, which does it for IPv4 on the router's links, has no IPv6
// counterpart, so a forwarded packet is looked up by its source address
// restricted to the link it came in on (nft's `fib saddr . iif oif`): an
// address EC2 assigned to the ENI, or a /80 prefix of it, is routed over
// that ENI's wire and passes; any other source, an unassigned address or
// one of another ENI, finds no route back through that link and is
// dropped, as EC2 drops it. Only forwarded packets are checked: neighbour
// discovery with the router itself must work from link-local sources.
func sourceCheck6(routerPath string) error {
	h, err := nsHandle(routerPath)
	if err != nil {
		return err
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		return fmt.Errorf("nftables in the router: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv6, Name: srcCheckTable})
	policy := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{
		Name: srcCheckChain, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &policy,
	})
	c.AddRule(&nftables.Rule{
		Table: t, Chain: ch,
		Exprs: []expr.Any{
			// An output interface of 0 is the lookup's "no route back
			// through iif" (nft's `oif missing`).
			&expr.Fib{Register: 1, ResultOIF: true, FlagSADDR: true, FlagIIF: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}},
			// The counter lets a test, or someone at the router with
			// `nft list table ip6 vpcnet-fabric`, see what was dropped.
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictDrop},
		},
		UserData: userdata.AppendString(nil, userdata.TypeComment, srcCheckOwner),
	})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("router's IPv6 source/destination check: %w", err)
	}
	return nil
}
