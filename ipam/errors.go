package ipam

import (
	"fmt"
	"net/netip"
	"time"
)

// The pool's errors are types, so the agent can tell with errors.As what
// ran out or what was wrong and say so to kubelet, in an Event and in a
// metric. Each message names the thing and, where there is one, the fix.

// NoFreeAddressError is returned by Assign when every address on the node
// is assigned or cooling down.
type NoFreeAddressError struct {
	Stats Stats
}

func (e *NoFreeAddressError) Error() string {
	if len(e.Stats.ENIs) == 0 {
		return "no free address: the pool has no ENI yet"
	}
	return "no free address: " + e.Stats.String()
}

// InvalidKeyError is a Key with an empty field; CNI always sets all three.
type InvalidKeyError struct {
	Key Key
}

func (e *InvalidKeyError) Error() string {
	return fmt.Sprintf("invalid key %q: network, container id and interface name must all be set", e.Key.String())
}

// InvalidENIError is an ENI the pool cannot model, with the reason.
type InvalidENIError struct {
	ID     string
	Reason string
}

func (e *InvalidENIError) Error() string {
	return fmt.Sprintf("invalid eni %q: %s", e.ID, e.Reason)
}

// DuplicateENIError is an ENI whose id or device index is already in the
// pool (Other is the ENI that has it; equal to ID for a repeated id).
type DuplicateENIError struct {
	ID          string
	DeviceIndex int
	Other       string
}

func (e *DuplicateENIError) Error() string {
	if e.Other == e.ID {
		return fmt.Sprintf("eni %s is already in the pool", e.ID)
	}
	return fmt.Sprintf("eni %s: device index %d is already taken by eni %s", e.ID, e.DeviceIndex, e.Other)
}

// UnknownENIError names an ENI the pool does not have.
type UnknownENIError struct {
	ID string
}

func (e *UnknownENIError) Error() string {
	return fmt.Sprintf("unknown eni %q: add it with AddENI first", e.ID)
}

// PrimaryENIError is an attempt to remove the instance's primary ENI.
type PrimaryENIError struct {
	ID string
}

func (e *PrimaryENIError) Error() string {
	return fmt.Sprintf("eni %s is the instance's primary ENI and cannot be removed", e.ID)
}

// UnknownBlockError names a block the pool does not have.
type UnknownBlockError struct {
	Block netip.Prefix
}

func (e *UnknownBlockError) Error() string {
	return fmt.Sprintf("unknown block %s", e.Block)
}

// InvalidBlockError is a prefix that cannot be a block, with the reason.
type InvalidBlockError struct {
	Block  netip.Prefix
	Reason string
}

func (e *InvalidBlockError) Error() string {
	return fmt.Sprintf("invalid block %s: %s", e.Block, e.Reason)
}

// BlockOutsideSubnetError is a block that does not lie inside its ENI's
// subnet: EC2 only assigns an ENI addresses from its own subnet.
type BlockOutsideSubnetError struct {
	Block  netip.Prefix
	ENIID  string
	Subnet netip.Prefix
}

func (e *BlockOutsideSubnetError) Error() string {
	return fmt.Sprintf("block %s is outside subnet %s of eni %s", e.Block, e.Subnet, e.ENIID)
}

// OverlapError is a block sharing addresses with one already on the node.
type OverlapError struct {
	Block    netip.Prefix
	Other    netip.Prefix
	OtherENI string
}

func (e *OverlapError) Error() string {
	if e.Block == e.Other {
		return fmt.Sprintf("block %s is already on eni %s", e.Block, e.OtherENI)
	}
	return fmt.Sprintf("block %s overlaps block %s on eni %s", e.Block, e.Other, e.OtherENI)
}

// PrimaryIPError is a block holding an ENI's primary address, which
// belongs to the ENI itself and is never handed to a pod.
type PrimaryIPError struct {
	Block    netip.Prefix
	BlockENI string
	Addr     netip.Addr
	ENIID    string // the ENI whose primary address it is
}

func (e *PrimaryIPError) Error() string {
	return fmt.Sprintf("block %s on eni %s holds %s, the primary address of eni %s", e.Block, e.BlockENI, e.Addr, e.ENIID)
}

// AddrNotOnNodeError is an address in no block of the pool.
type AddrNotOnNodeError struct {
	Addr netip.Addr
	// PrimaryOf is set when Addr is that ENI's primary address.
	PrimaryOf string
}

func (e *AddrNotOnNodeError) Error() string {
	if e.PrimaryOf != "" {
		return fmt.Sprintf("address %s is the primary address of eni %s, not a pod address", e.Addr, e.PrimaryOf)
	}
	return fmt.Sprintf("address %s is not on this node: no block holds it", e.Addr)
}

// AddrHeldError is an address another key holds.
type AddrHeldError struct {
	Addr   netip.Addr
	Holder Key
	Pod    Pod
}

func (e *AddrHeldError) Error() string {
	return fmt.Sprintf("address %s is held by %s (pod %s)", e.Addr, e.Holder, e.Pod)
}

// AddrCoolingError is an address released so recently that it is still
// cooling down.
type AddrCoolingError struct {
	Addr  netip.Addr
	Until time.Time
}

func (e *AddrCoolingError) Error() string {
	return fmt.Sprintf("address %s was released and cools down until %s", e.Addr, e.Until.UTC().Format(time.RFC3339))
}

// KeyConflictError is a key asked to hold an address while it holds
// another; one attachment has one address.
type KeyConflictError struct {
	Key  Key
	Held netip.Addr
	Want netip.Addr
}

func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("%s already holds %s, not %s", e.Key, e.Held, e.Want)
}

// InUseError refuses to remove an ENI or block whose addresses are still
// assigned or cooling down. Until is when the last cooling one comes free.
type InUseError struct {
	ENIID    string
	Block    netip.Prefix // zero when the whole ENI was to be removed
	Assigned int
	Cooling  int
	Until    time.Time
}

func (e *InUseError) Error() string {
	what := "eni " + e.ENIID
	if e.Block.IsValid() {
		what = fmt.Sprintf("block %s on eni %s", e.Block, e.ENIID)
	}
	msg := fmt.Sprintf("%s is in use: %d assigned, %d cooling", what, e.Assigned, e.Cooling)
	if e.Cooling > 0 {
		msg += fmt.Sprintf(" until %s", e.Until.UTC().Format(time.RFC3339))
	}
	return msg + "; it can go only once every address is released and cooled down"
}
