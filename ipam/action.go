package ipam

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
)

// ActionKind says which EC2 mutation an Action asks for.
type ActionKind int

const (
	// ReleaseBlocks unassigns Blocks from the existing ENI ENIID
	// (UnassignPrivateIpAddresses; prefixes as Ipv4Prefixes).
	ReleaseBlocks ActionKind = iota + 1
	// AssignBlocks assigns Count more secondary addresses, or /28 prefixes
	// when Prefixes is set, to the existing ENI ENIID
	// (AssignPrivateIpAddresses; prefixes as Ipv4PrefixCount).
	AssignBlocks
	// AttachENI creates an ENI in SubnetID with SecurityGroups and Count
	// secondary addresses, or /28 prefixes when Prefixes is set, and
	// attaches it at the lowest free device index
	// (CreateNetworkInterface, AttachNetworkInterface).
	AttachENI
	// DetachENI detaches the ENI ENIID and deletes it; its Blocks go with
	// it (DetachNetworkInterface, DeleteNetworkInterface).
	DetachENI
)

func (k ActionKind) String() string {
	switch k {
	case ReleaseBlocks:
		return "release"
	case AssignBlocks:
		return "assign"
	case AttachENI:
		return "attach"
	case DetachENI:
		return "detach"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is one change to the node's ENIs that Plan asks the agent to
// make. The agent logs every one with its Reason before calling EC2.
//
// Ordering. Plan returns actions in this order, and the agent performs
// them in it, one at a time:
//
//  1. ReleaseBlocks, highest device index first. Releases free per-ENI
//     slots and subnet addresses (a /28 needs 16 aligned free ones) that
//     the assigns and attaches after them may need, and Plan never
//     releases an address a target still counts on, so doing them first
//     costs nothing.
//  2. AssignBlocks, lowest device index first. Existing ENIs are filled
//     before a new one is made: one call, no attachment wait, and if it
//     fails the agent stops before attaching an ENI that may not be
//     needed.
//  3. AttachENI.
//  4. DetachENI, highest device index first. Detaching is the slowest
//     and least reversible change (ENI delete, route table teardown), so
//     it comes only after any growth in the same plan has succeeded: if a
//     plan fails halfway the node is left with more addresses, not fewer.
//
// A plan either grows the pool (AssignBlocks, AttachENI) or shrinks it
// (ReleaseBlocks, DetachENI), except for two housekeeping cases that never
// take the pool below its target: releasing fully free blocks of the kind the
// pool no longer uses (secondary addresses after prefix delegation is
// turned on, or prefixes after it is turned off), and detaching an ENI
// that growth left untouched and that the pool does not need.
//
// Each action was computed as if every action before it succeeded. When
// one fails, the agent stops, drops the rest, and plans again from a
// fresh snapshot; every action is safe to skip.
//
// Before a ReleaseBlocks or DetachENI, the agent removes the blocks from
// the pool only if they are still entirely free (a pod may have taken an
// address since the snapshot): it skips a block that is not, and the
// whole detach of an ENI that has one. Plan chose them from a snapshot;
// the pool decides at the instant of removal.
type Action struct {
	Kind ActionKind
	// ENIID is the ENI acted on; empty for AttachENI.
	ENIID string
	// Count is how many blocks AssignBlocks and AttachENI ask for.
	Count int
	// Prefixes says Count counts /28 prefixes rather than /32 addresses.
	Prefixes bool
	// IPv6 says AssignBlocks asks for IPv6 /80 prefixes instead
	// (AssignIpv6Addresses with Ipv6PrefixCount): the IPv6 mode's one
	// action, from PlanIPv6.
	IPv6 bool
	// Blocks are the blocks ReleaseBlocks gives back, or those DetachENI
	// takes with the ENI.
	Blocks []netip.Prefix
	// SubnetID and SecurityGroups are where AttachENI creates the ENI.
	SubnetID       string
	SecurityGroups []string
	// Reason says why, in terms of the settings an operator knows.
	Reason string
}

// String renders the action the way the agent logs it.
func (a Action) String() string {
	var b strings.Builder
	switch a.Kind {
	case ReleaseBlocks:
		fmt.Fprintf(&b, "release %s from %s %v", a.blockNoun(len(a.Blocks)), a.ENIID, a.Blocks)
	case AssignBlocks:
		fmt.Fprintf(&b, "assign %s to %s", a.blockNoun(a.Count), a.ENIID)
	case AttachENI:
		fmt.Fprintf(&b, "attach a new ENI in %s with %s", a.SubnetID, a.blockNoun(a.Count))
		if len(a.SecurityGroups) > 0 {
			fmt.Fprintf(&b, " (security groups %s)", strings.Join(a.SecurityGroups, ","))
		}
	case DetachENI:
		fmt.Fprintf(&b, "detach and delete %s", a.ENIID)
		if len(a.Blocks) > 0 {
			fmt.Fprintf(&b, " and its %s", a.blockNoun(len(a.Blocks)))
		}
	default:
		b.WriteString(a.Kind.String())
	}
	if a.Reason != "" {
		b.WriteString(": ")
		b.WriteString(a.Reason)
	}
	return b.String()
}

// Brings is how many pod addresses the action adds to the pool once EC2
// has done it: Count addresses, or Count /28 prefixes of 16, for
// AttachENI and AssignBlocks; an IPv6 /80 holds more than any node runs
// pods (math.MaxInt32); the other kinds add none.
func (a Action) Brings() int {
	switch {
	case a.Kind != AttachENI && a.Kind != AssignBlocks:
		return 0
	case a.IPv6:
		return math.MaxInt32
	case a.Prefixes:
		return a.Count * PrefixAddrs
	}
	return a.Count
}

func (a Action) blockNoun(n int) string {
	switch {
	case a.IPv6:
		return plural(n, "IPv6 /80 prefix", "IPv6 /80 prefixes")
	case len(a.Blocks) > 0 && a.Blocks[0].Bits() != 32:
		return plural(n, "prefix", "prefixes")
	case a.Prefixes:
		return plural(n, "/28 prefix", "/28 prefixes")
	}
	return plural(n, "address", "addresses")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
