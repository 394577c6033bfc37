package verdicts

import "net/netip"

// Conn is one connection as the rules see its first packet.
type Conn struct {
	Src, Dst netip.Addr
	Protocol Protocol
	Port     uint16 // destination port
}

// Allowed says whether rs lets c through: the source's egress and the
// destination's ingress must both pass, each judged only when the pod at
// that end is in rs. It is what the dataplane's rules must do, written
// plainly, so tests of either can ask it.
func (rs Ruleset) Allowed(c Conn) bool {
	for _, r := range rs.Pods {
		if r.Pod.IP == c.Src && r.Egress != nil && !r.Egress.passes(c.Dst, c) {
			return false
		}
		if r.Pod.IP == c.Dst && r.Ingress != nil && !r.Ingress.passes(c.Src, c) {
			return false
		}
	}
	return true
}

func (iso *Isolation) passes(peer netip.Addr, c Conn) bool {
	for _, a := range iso.Allows {
		if a.matches(peer, c) {
			return true
		}
	}
	return false
}

func (a Allow) matches(peer netip.Addr, c Conn) bool {
	if !a.AnyPeer && !containsAddr(a.Peers, peer) {
		return false
	}
	if a.Ports == nil {
		return true
	}
	for _, p := range a.Ports {
		if p.Protocol == c.Protocol && (p.AllPorts() || (p.First <= c.Port && c.Port <= p.Last)) {
			return true
		}
	}
	return false
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
