package dataplane

import (
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nftConn is the package's only door to nf_tables, bound to one network
// namespace. Reads return nil, not an error, for a table that does not
// exist; writes are queued and applied atomically by commit, so the kernel
// never holds half of a change.
type nftConn struct {
	c *nftables.Conn
	// setIDs numbers the sets this connection queues: google/nftables
	// (v0.3.0) numbers a set given none from a package counter, which
	// two connections written from two goroutines (two pods' ADDs)
	// race on. A set's ID need only be unique in its transaction.
	setIDs uint32
}

func newNFT(target ns.NetNS) (*nftConn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(target.Fd())), nftables.AsLasting(), nftables.WithSockOptions(bigSendBuffer))
	if err != nil {
		return nil, fmt.Errorf("open nftables in %s: %w", target.Path(), err)
	}
	return &nftConn{c: c}, nil
}

func (n *nftConn) close() { _ = n.c.CloseLasting() }

// sendBuffer is the netlink socket's send and receive buffer. One
// transaction is one sendmsg, and a node's policy table (a hundred
// isolated pods with their rules and sets) is larger than the default
// buffer (net.core.wmem_default, 208 KiB), which fails the write with
// EMSGSIZE; the kernel's acknowledgement of each of its messages then
// overflows the default receive buffer (ENOBUFS). SO_SNDBUFFORCE and
// SO_RCVBUFFORCE, which the agent's CAP_NET_ADMIN allows, pass
// net.core.wmem_max and rmem_max. The kernel charges what is queued, not
// the size asked for.
const sendBuffer = 64 << 20

func bigSendBuffer(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("nftables socket: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sendBuffer),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, sendBuffer))
	}); err != nil {
		return fmt.Errorf("nftables socket: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("nftables socket send buffer of %d bytes: %w", sendBuffer, serr)
	}
	return nil
}

// readRetries bounds retries of a read that a signal interrupted.
const readRetries = 5

func nftRead[T any](f func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := f()
		if !errors.Is(err, unix.EINTR) || attempt == readRetries {
			return v, err
		}
	}
}

// table returns our table of family fam, or nil when it does not exist.
// It asks for that table alone: a dump of every table of the family
// was a sixth of what a policy write cost.
func (n *nftConn) table(fam nftables.TableFamily, name string) (*nftables.Table, error) {
	t, err := nftRead(func() (*nftables.Table, error) {
		return n.c.ListTableOfFamily(name, fam)
	})
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read nftables table %s: %w", name, err)
	}
	return t, nil
}

func (n *nftConn) chains(t *nftables.Table) ([]*nftables.Chain, error) {
	all, err := nftRead(func() ([]*nftables.Chain, error) {
		return n.c.ListChainsOfTableFamily(t.Family)
	})
	if err != nil {
		return nil, fmt.Errorf("list chains of table %s: %w", t.Name, err)
	}
	var out []*nftables.Chain
	for _, c := range all {
		if c.Table.Name == t.Name {
			out = append(out, c)
		}
	}
	return out, nil
}

func (n *nftConn) rules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error) {
	rs, err := nftRead(func() ([]*nftables.Rule, error) { return n.c.GetRules(t, c) })
	if err != nil {
		return nil, fmt.Errorf("list rules of chain %s %s: %w", t.Name, c.Name, err)
	}
	return rs, nil
}

func (n *nftConn) sets(t *nftables.Table) ([]*nftables.Set, error) {
	ss, err := nftRead(func() ([]*nftables.Set, error) { return n.c.GetSets(t) })
	if err != nil {
		return nil, fmt.Errorf("list sets of table %s: %w", t.Name, err)
	}
	return ss, nil
}

func (n *nftConn) setElements(s *nftables.Set) ([]nftables.SetElement, error) {
	es, err := nftRead(func() ([]nftables.SetElement, error) { return n.c.GetSetElements(s) })
	if err != nil {
		return nil, fmt.Errorf("list elements of set %s %s: %w", s.Table.Name, s.Name, err)
	}
	return es, nil
}

// objects lists t's stateful objects (named counters among them) with
// their current values.
func (n *nftConn) objects(t *nftables.Table) ([]nftables.Obj, error) {
	objs, err := nftRead(func() ([]nftables.Obj, error) { return n.c.GetObjects(t) })
	if err != nil {
		return nil, fmt.Errorf("list objects of table %s: %w", t.Name, err)
	}
	return objs, nil
}

// Queued writes; nothing reaches the kernel until commit.
func (n *nftConn) addTable(t *nftables.Table) *nftables.Table { return n.c.AddTable(t) }
func (n *nftConn) delTable(t *nftables.Table)                 { n.c.DelTable(t) }
func (n *nftConn) addChain(c *nftables.Chain) *nftables.Chain { return n.c.AddChain(c) }
func (n *nftConn) delChain(c *nftables.Chain)                 { n.c.DelChain(c) }
func (n *nftConn) addRule(r *nftables.Rule) *nftables.Rule    { return n.c.AddRule(r) }
func (n *nftConn) addObj(o nftables.Obj)                      { n.c.AddObj(o) }
func (n *nftConn) delObj(o nftables.Obj)                      { n.c.DeleteObject(o) }
func (n *nftConn) delSet(s *nftables.Set)                     { n.c.DelSet(s) }

func (n *nftConn) flushChain(c *nftables.Chain) { n.c.FlushChain(c) }

// setAddElements and setDeleteElements queue elements of an existing
// set; like addSet, an error is a bug in what we built.
func (n *nftConn) setAddElements(s *nftables.Set, elems []nftables.SetElement) error {
	if err := n.c.SetAddElements(s, elems); err != nil {
		return fmt.Errorf("elements of set %s: %w", s.Name, err)
	}
	return nil
}

func (n *nftConn) setDeleteElements(s *nftables.Set, elems []nftables.SetElement) error {
	if err := n.c.SetDeleteElements(s, elems); err != nil {
		return fmt.Errorf("elements of set %s: %w", s.Name, err)
	}
	return nil
}

// flushTable deletes every rule of t, leaving its chains, sets and
// objects.
func (n *nftConn) flushTable(t *nftables.Table) { n.c.FlushTable(t) }

// addSet queues s with its elements. The library checks the elements
// against s before queueing (an interval set's ends, a map's data): an
// error here is a bug in what we built, and nothing was queued.
func (n *nftConn) addSet(s *nftables.Set, elems []nftables.SetElement) error {
	if s.ID == 0 {
		n.setIDs++
		s.ID = n.setIDs
	}
	if err := n.c.AddSet(s, elems); err != nil {
		return fmt.Errorf("set %s: %w", s.Name, err)
	}
	return nil
}

// commit applies the queued writes as one nf_tables transaction.
func (n *nftConn) commit() error { return n.c.Flush() }
