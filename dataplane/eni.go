package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ENIConfig describes one secondary ENI.
type ENIConfig struct {
	// MAC finds the ENI's interface, which appears some time after attach.
	MAC net.HardwareAddr
	// DeviceIndex is the attachment's device index (1 or more); the ENI's
	// route table is DeviceIndex+1.
	DeviceIndex int
	// PrimaryIP is the ENI's primary private address.
	PrimaryIP netip.Addr
	// SubnetCIDR is the ENI's subnet; its gateway is the first address.
	SubnetCIDR netip.Prefix
	// MTU of the interface; 0 means DefaultMTU.
	MTU int
}

func (c ENIConfig) validate() error {
	switch {
	case len(c.MAC) == 0:
		return errors.New("ENI config: MAC is empty")
	case c.DeviceIndex < 1:
		return fmt.Errorf("ENI config %s: device index %d is not a secondary ENI (the primary ENI uses the main table)", c.MAC, c.DeviceIndex)
	case !c.SubnetCIDR.IsValid() || !c.SubnetCIDR.Addr().Is4() || c.SubnetCIDR.Bits() > 28:
		return fmt.Errorf("ENI config %s: subnet %q is not an IPv4 CIDR of /28 or wider", c.MAC, c.SubnetCIDR)
	case !c.PrimaryIP.Is4() || !c.SubnetCIDR.Contains(c.PrimaryIP):
		return fmt.Errorf("ENI config %s: primary IP %q is not in subnet %s", c.MAC, c.PrimaryIP, c.SubnetCIDR)
	}
	if err := validRouteTable(ENITable(c.DeviceIndex)); err != nil {
		return fmt.Errorf("ENI config %s: device index %d: %w", c.MAC, c.DeviceIndex, err)
	}
	return validMTU(c.MTU)
}

// SetupENI configures a secondary ENI the way aws-node's SetupENINetwork
// does: MTU, link up, the primary IP (with the subnet's mask) as its only
// global IPv4 address, table DeviceIndex+1 holding a link route to the
// subnet gateway and a default route via it, and no subnet route in the
// main table (it would send traffic for the subnet out of this ENI with the
// wrong source). Rule 32765 sends traffic from the ENI's primary IP to its
// table. It waits for the interface to appear, bounded by ctx or LinkWait.
func (d *Dataplane) SetupENI(ctx context.Context, cfg ENIConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()

	link, err := d.waitLink(ctx, s, cfg.MAC)
	if err != nil {
		return err
	}
	name := link.Attrs().Name
	mtu := orDefaultMTU(cfg.MTU)
	if link.Attrs().MTU != mtu {
		if err := s.nl.linkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("set MTU %d on ENI %s (%s): %w", mtu, cfg.MAC, name, err)
		}
	}
	if err := s.nl.linkSetUp(link); err != nil {
		return fmt.Errorf("set ENI %s (%s) up: %w", cfg.MAC, name, err)
	}
	if err := ensureOnlyAddr(s.nl, link, netip.PrefixFrom(cfg.PrimaryIP, cfg.SubnetCIDR.Bits())); err != nil {
		return fmt.Errorf("ENI %s (%s): %w", cfg.MAC, name, err)
	}
	table := ENITable(cfg.DeviceIndex)
	if err := ensureENITable(s.nl, link, table, SubnetGateway(cfg.SubnetCIDR)); err != nil {
		return fmt.Errorf("ENI %s (%s): %w", cfg.MAC, name, err)
	}
	subnetRoute := &netlink.Route{
		Dst: ipNet(cfg.SubnetCIDR.Masked()), Src: cfg.PrimaryIP.AsSlice(),
		Table: mainTable, Scope: netlink.SCOPE_LINK, LinkIndex: link.Attrs().Index,
	}
	if err := s.nl.routeDel(subnetRoute); err != nil && !isNotExist(err) {
		return fmt.Errorf("ENI %s (%s): delete main-table route to %s: %w", cfg.MAC, name, cfg.SubnetCIDR, err)
	}
	if err := ensureENIRule(s.nl, cfg.PrimaryIP, table); err != nil {
		return fmt.Errorf("ENI %s (%s): %w", cfg.MAC, name, err)
	}
	d.log.Info("ENI configured", "mac", cfg.MAC.String(), "interface", name, "table", table, "primaryIP", cfg.PrimaryIP)
	return nil
}

// TeardownENI removes what SetupENI added: rule 32765 and the routes of
// the ENI's table, and the primary IP if the interface is still there.
// Detaching the ENI removes the interface but not the rule, hence this.
func (d *Dataplane) TeardownENI(ctx context.Context, cfg ENIConfig) error {
	if cfg.DeviceIndex < 1 {
		return fmt.Errorf("ENI config %s: device index %d is not a secondary ENI", cfg.MAC, cfg.DeviceIndex)
	}
	s, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	table := ENITable(cfg.DeviceIndex)
	have, err := s.nl.rules()
	if err != nil {
		return err
	}
	if err := deleteRules(s.nl, have, func(r ipRule) bool {
		return r.priority == ENIPrimaryPriority && r.table == table
	}); err != nil {
		return err
	}
	routes, err := s.nl.routes(table)
	if err != nil {
		return err
	}
	for _, r := range routes {
		if err := s.nl.routeDel(&r); err != nil && !isNotExist(err) {
			return fmt.Errorf("delete route %s from table %d: %w", r, table, err)
		}
	}
	if len(cfg.MAC) == 0 || !cfg.PrimaryIP.IsValid() {
		return nil
	}
	link, err := s.nl.linkByMAC(cfg.MAC)
	if err != nil || link == nil {
		return err
	}
	addrs, err := s.nl.addrs(link)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if addrOf(a.IP) == cfg.PrimaryIP {
			if err := s.nl.addrDel(link, &a); err != nil && !isNotExist(err) {
				return fmt.Errorf("remove %s from ENI %s: %w", cfg.PrimaryIP, cfg.MAC, err)
			}
		}
	}
	return nil
}

// waitLink waits for the interface with mac: after AttachNetworkInterface
// the kernel sees the device some seconds later.
func (d *Dataplane) waitLink(ctx context.Context, s *session, mac net.HardwareAddr) (netlink.Link, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.linkWait)
		defer cancel()
	}
	// A link subscription wakes the wait as the interface appears: a
	// burst's pods wait for it. Polling stays, since a subscription's
	// socket drops messages when it overflows. Subscribed before the
	// first look, so an interface that appears in between is not missed.
	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	if err := subscribeLinks(s.ns, updates, done); err != nil {
		d.log.Debug("waiting for an ENI's interface by polling alone", "err", err)
		updates = nil
	}
	defer func() {
		close(done)
		if updates != nil {
			go func() {
				for range updates {
				}
			}()
		}
	}()
	tick := time.NewTicker(d.pollInterval)
	defer tick.Stop()
	for {
		l, err := s.nl.linkByMAC(mac)
		if err != nil || l != nil {
			return l, err
		}
		if d.notFound != nil {
			d.notFound()
		}
		if err := nextLook(ctx, tick.C, &updates, mac); err != nil {
			return nil, fmt.Errorf("no interface with MAC %s appeared (is the ENI attached? check its attachment state in EC2): %w", mac, err)
		}
	}
}

// nextLook waits for the next poll or for a link with mac to be added,
// whichever comes first; other links' changes are passed over.
func nextLook(ctx context.Context, tick <-chan time.Time, updates *chan netlink.LinkUpdate, mac net.HardwareAddr) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			return nil
		case u, ok := <-*updates:
			if !ok {
				*updates = nil // polling alone from now on
				continue
			}
			if u.Header.Type == unix.RTM_NEWLINK && u.Link != nil && u.Link.Attrs().HardwareAddr.String() == mac.String() {
				return nil
			}
		}
	}
}

// ensureOnlyAddr leaves want as the link's only global IPv4 address without
// removing it first when it is already there (that would drop its routes).
func ensureOnlyAddr(nl *nlHandle, link netlink.Link, want netip.Prefix) error {
	addrs, err := nl.addrs(link)
	if err != nil {
		return err
	}
	present := false
	for _, a := range addrs {
		got := prefixOf(a.IPNet)
		if got == want {
			present = true
			continue
		}
		if a.IP.IsGlobalUnicast() {
			if err := nl.addrDel(link, &a); err != nil && !isNotExist(err) {
				return fmt.Errorf("remove stale address %s: %w", got, err)
			}
		}
	}
	if present {
		return nil
	}
	if err := nl.addrAdd(link, &netlink.Addr{IPNet: ipNet(want)}); err != nil && !isExist(err) {
		return fmt.Errorf("add address %s: %w", want, err)
	}
	return nil
}

// ensureENITable makes table hold exactly the gateway link route and the
// default route via the gateway, both on link; routes left by an earlier
// ENI at the same device index are removed.
func ensureENITable(nl *nlHandle, link netlink.Link, table int, gw netip.Addr) error {
	idx := link.Attrs().Index
	want := []netlink.Route{
		{LinkIndex: idx, Dst: ipNet(host(gw)), Scope: netlink.SCOPE_LINK, Table: table},
		{LinkIndex: idx, Dst: ipNet(netip.PrefixFrom(netip.IPv4Unspecified(), 0)), Gw: gw.AsSlice(), Scope: netlink.SCOPE_UNIVERSE, Table: table},
	}
	have, err := nl.routes(table)
	if err != nil {
		return err
	}
	for _, r := range have {
		if !sameRoute(r, want[0]) && !sameRoute(r, want[1]) {
			if err := nl.routeDel(&r); err != nil && !isNotExist(err) {
				return fmt.Errorf("delete stale route %s from table %d: %w", r, table, err)
			}
		}
	}
	for _, r := range want {
		if err := nl.routeReplace(&r); err != nil {
			return fmt.Errorf("set route %s in table %d: %w", r, table, err)
		}
	}
	return nil
}

func sameRoute(a, b netlink.Route) bool {
	return a.LinkIndex == b.LinkIndex && a.Table == b.Table && a.Scope == b.Scope &&
		prefixOrDefault(a.Dst) == prefixOrDefault(b.Dst) && addrOf(a.Gw) == addrOf(b.Gw)
}

// prefixOrDefault reads a route destination; the kernel reports the default
// route with no destination.
func prefixOrDefault(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	return prefixOf(n)
}

// ensureENIRule keeps exactly one rule 32765 for table: from primary.
func ensureENIRule(nl *nlHandle, primary netip.Addr, table int) error {
	want := ipRule{priority: ENIPrimaryPriority, src: host(primary), table: table}
	have, err := nl.rules()
	if err != nil {
		return err
	}
	stale := func(r ipRule) bool {
		return r.priority == ENIPrimaryPriority && r != want && (r.table == table || r.src == want.src)
	}
	if err := deleteRules(nl, have, stale); err != nil {
		return err
	}
	return ensureRule(nl, have, want)
}
