package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// dumpAttempts bounds retries of a dump the kernel flagged as interrupted
// (NLM_F_DUMP_INTR: the table changed while it was being read).
const dumpAttempts = 5

// nlHandle is the package's only door to rtnetlink. It is bound to one
// network namespace when created, so calls keep working there whatever OS
// thread the goroutine later runs on. Dumps are retried when interrupted
// and fail rather than return a partial table: reconciling against half a
// table would delete or duplicate state.
type nlHandle struct {
	h *netlink.Handle
}

func newNL(target ns.NetNS) (*nlHandle, error) {
	// Route sockets only: the default also opens xfrm and netfilter
	// sockets, each entering the namespace and leaving it again, which a
	// plugin process pays on every ADD and DEL for nothing.
	h, err := netlink.NewHandleAt(netns.NsHandle(int(target.Fd())), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open rtnetlink in %s: %w", target.Path(), err)
	}
	return &nlHandle{h: h}, nil
}

func (n *nlHandle) close() { n.h.Close() }

// subscribeLinks sends the link changes in target to ch until done is
// closed; the subscriber then closes ch. It blocks on a full ch, so the
// caller must read ch until it is closed.
func subscribeLinks(target ns.NetNS, ch chan<- netlink.LinkUpdate, done <-chan struct{}) error {
	h := netns.NsHandle(int(target.Fd()))
	if err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{Namespace: &h}); err != nil {
		return fmt.Errorf("subscribe to links in %s: %w", target.Path(), err)
	}
	return nil
}

func dump[T any](what string, f func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
		if attempt == dumpAttempts {
			var zero T
			return zero, fmt.Errorf("list %s: interrupted by concurrent changes %d times: %w", what, attempt, err)
		}
	}
}

func (n *nlHandle) links() ([]netlink.Link, error) {
	return dump("links", n.h.LinkList)
}

// linkByName returns nil, nil when no link has that name.
func (n *nlHandle) linkByName(name string) (netlink.Link, error) {
	l, err := dump("link "+name, func() (netlink.Link, error) { return n.h.LinkByName(name) })
	if isNotExist(err) {
		return nil, nil
	}
	return l, err
}

// linkByIndex returns nil, nil when no link has that index.
func (n *nlHandle) linkByIndex(index int) (netlink.Link, error) {
	l, err := dump(fmt.Sprintf("link %d", index), func() (netlink.Link, error) { return n.h.LinkByIndex(index) })
	if isNotExist(err) {
		return nil, nil
	}
	return l, err
}

// linkByMAC returns nil, nil when no link has that hardware address.
func (n *nlHandle) linkByMAC(mac net.HardwareAddr) (netlink.Link, error) {
	links, err := n.links()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if l.Attrs().HardwareAddr.String() == mac.String() {
			return l, nil
		}
	}
	return nil, nil
}

func (n *nlHandle) addrs(link netlink.Link) ([]netlink.Addr, error) {
	return dump("addresses of "+link.Attrs().Name, func() ([]netlink.Addr, error) {
		return n.h.AddrList(link, netlink.FAMILY_V4)
	})
}

// routes lists IPv4 routes of one table (254 is main).
func (n *nlHandle) routes(table int) ([]netlink.Route, error) {
	return dump(fmt.Sprintf("routes of table %d", table), func() ([]netlink.Route, error) {
		return n.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	})
}

func (n *nlHandle) rules() ([]netlink.Rule, error) {
	return dump("rules", func() ([]netlink.Rule, error) { return n.h.RuleList(netlink.FAMILY_V4) })
}

// familyOf is the netlink family of a, for the IPv6 pods' lists: the
// rest of the package lists IPv4 only.
func familyOf(a netip.Addr) int {
	if a.Is6() && !a.Is4In6() {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// rulesOf lists the rules of a's family.
func (n *nlHandle) rulesOf(a netip.Addr) ([]netlink.Rule, error) {
	return dump("rules", func() ([]netlink.Rule, error) { return n.h.RuleList(familyOf(a)) })
}

// routesOf lists the routes of a's family in one table.
func (n *nlHandle) routesOf(a netip.Addr, table int) ([]netlink.Route, error) {
	return dump(fmt.Sprintf("routes of table %d", table), func() ([]netlink.Route, error) {
		return n.h.RouteListFiltered(familyOf(a), &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	})
}

// allRoutes lists one table's routes of both families.
func (n *nlHandle) allRoutes(table int) ([]netlink.Route, error) {
	return dump(fmt.Sprintf("routes of table %d", table), func() ([]netlink.Route, error) {
		return n.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	})
}

// addrsOf lists a link's addresses of a's family.
func (n *nlHandle) addrsOf(a netip.Addr, link netlink.Link) ([]netlink.Addr, error) {
	return dump("addresses of "+link.Attrs().Name, func() ([]netlink.Addr, error) {
		return n.h.AddrList(link, familyOf(a))
	})
}

// neighboursOf lists a link's neighbours of a's family.
func (n *nlHandle) neighboursOf(a netip.Addr, link netlink.Link) ([]netlink.Neigh, error) {
	return dump("neighbours of "+link.Attrs().Name, func() ([]netlink.Neigh, error) {
		return n.h.NeighList(link.Attrs().Index, familyOf(a))
	})
}

// allAddrs lists a link's addresses of both families.
func (n *nlHandle) allAddrs(link netlink.Link) ([]netlink.Addr, error) {
	return dump("addresses of "+link.Attrs().Name, func() ([]netlink.Addr, error) {
		return n.h.AddrList(link, netlink.FAMILY_ALL)
	})
}

func (n *nlHandle) linkAdd(l netlink.Link) error           { return n.h.LinkAdd(l) }
func (n *nlHandle) linkDel(l netlink.Link) error           { return n.h.LinkDel(l) }
func (n *nlHandle) linkSetUp(l netlink.Link) error         { return n.h.LinkSetUp(l) }
func (n *nlHandle) linkSetMTU(l netlink.Link, m int) error { return n.h.LinkSetMTU(l, m) }
func (n *nlHandle) addrAdd(l netlink.Link, a *netlink.Addr) error {
	return n.h.AddrAdd(l, a)
}
func (n *nlHandle) addrDel(l netlink.Link, a *netlink.Addr) error {
	return n.h.AddrDel(l, a)
}
func (n *nlHandle) routeReplace(r *netlink.Route) error { return n.h.RouteReplace(r) }
func (n *nlHandle) routeDel(r *netlink.Route) error     { return n.h.RouteDel(r) }
func (n *nlHandle) ruleAdd(r *netlink.Rule) error       { return n.h.RuleAdd(r) }
func (n *nlHandle) ruleDel(r *netlink.Rule) error       { return n.h.RuleDel(r) }
func (n *nlHandle) neighSet(nb *netlink.Neigh) error    { return n.h.NeighSet(nb) }

// isNotExist reports whether err says the object is already gone, which
// deletions treat as success.
func isNotExist(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) ||
		errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENODEV)
}

func isExist(err error) bool { return errors.Is(err, syscall.EEXIST) }

// forgetUDPFlows deletes target's conntrack entries of UDP flows to ports.
func forgetUDPFlows(target ns.NetNS, ports []uint16) error {
	h, err := netlink.NewHandleAt(netns.NsHandle(int(target.Fd())), unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("open conntrack netlink in %s: %w", target.Path(), err)
	}
	defer h.Close()
	filters := make([]netlink.CustomConntrackFilter, 0, len(ports))
	for _, p := range ports {
		f := &netlink.ConntrackFilter{}
		if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
			return err
		}
		if err := f.AddPort(netlink.ConntrackOrigDstPort, p); err != nil {
			return err
		}
		filters = append(filters, f)
	}
	if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filters...); err != nil {
		return fmt.Errorf("delete UDP conntrack entries of ports %v: %w", ports, err)
	}
	return nil
}

// forgetFlowsFrom deletes target's IPv4 conntrack entries whose original
// source is one of addrs.
func forgetFlowsFrom(target ns.NetNS, addrs []netip.Addr) error {
	h, err := netlink.NewHandleAt(netns.NsHandle(int(target.Fd())), unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("open conntrack netlink in %s: %w", target.Path(), err)
	}
	defer h.Close()
	filters := make([]netlink.CustomConntrackFilter, 0, len(addrs))
	for _, a := range addrs {
		f := &netlink.ConntrackFilter{}
		if err := f.AddIP(netlink.ConntrackOrigSrcIP, a.AsSlice()); err != nil {
			return err
		}
		filters = append(filters, f)
	}
	if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filters...); err != nil {
		return fmt.Errorf("delete conntrack entries from %v: %w", addrs, err)
	}
	return nil
}
