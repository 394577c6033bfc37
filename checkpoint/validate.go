package checkpoint

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// checkEntry reports what makes e unfit to be an assignment, or
// impossible to write. Encode calls it before writing and Decode after
// reading each entry, so whatever Decode returns Encode can write back:
// the agent rewrites the checkpoint right after loading it, and a state it
// cannot write would stop it at every start.
func checkEntry(e Entry) error {
	if err := checkKey(e.Key); err != nil {
		return err
	}
	if !e.Addr.IsValid() {
		return errors.New("no address")
	}
	if err := checkFamily(e.Addr); err != nil {
		return err
	}
	if err := checkUnicast(e.Addr); err != nil {
		return err
	}
	if !writableTime(e.AssignedAt) {
		return fmt.Errorf("assigned-at time %s is outside years 0-9999", e.AssignedAt)
	}
	if !writableTime(e.UnroutedSince) {
		return fmt.Errorf("unrouted-since time %s is outside years 0-9999", e.UnroutedSince)
	}
	return nil
}

// writableTime says whether Encode can write t: an RFC 3339 time has a
// four-digit year, and Encode writes it in UTC, so the limit applies to
// the UTC year, not the year in t's zone.
func writableTime(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

// checkKey requires every part of the owner key: CNI identifies an
// attachment by all three, and a partial key would match the wrong one.
func checkKey(k ipam.Key) error {
	switch {
	case k.Network == "":
		return errors.New("owner has no network name")
	case k.ContainerID == "":
		return errors.New("owner has no container id")
	case k.IfName == "":
		return errors.New("owner has no interface name")
	}
	return nil
}

// checkFamily accepts an IPv4 address, or a plain IPv6 one (aws-node's
// IPv6 mode): not an IPv4-mapped IPv6 address, which would never compare
// equal to its IPv4 form, nor one with a zone, which no pod address has.
func checkFamily(a netip.Addr) error {
	if a.Is4() || a.Is6() && !a.Is4In6() && a.Zone() == "" {
		return nil
	}
	return fmt.Errorf("address %q is not an IPv4 or IPv6 address", a)
}

// checkUnicast refuses the addresses no pod can hold, which can only
// appear through corruption.
func checkUnicast(a netip.Addr) error {
	if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() || a == broadcast {
		return fmt.Errorf("address %s is not a unicast address a pod can hold", a)
	}
	return nil
}

// family is which addresses a checkpoint field holds.
type family int

const (
	anyFamily family = iota // vpcnet's address fields
	onlyIPv4                // aws-node's ipv4
	onlyIPv6                // aws-node's ipv6
)

func (f family) holds(a netip.Addr) bool {
	switch f {
	case onlyIPv4:
		return a.Is4()
	case onlyIPv6:
		return a.Is6() && checkFamily(a) == nil
	}
	return checkFamily(a) == nil
}

func (f family) String() string {
	switch f {
	case onlyIPv4:
		return "an IPv4 address"
	case onlyIPv6:
		return "an IPv6 address"
	}
	return "an IPv4 or IPv6 address"
}

// parseAddr parses an address of fam as written in a checkpoint.
func parseAddr(field, s string, fam family) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("no %s", field)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !fam.holds(a) {
		return netip.Addr{}, fmt.Errorf("%s %q is not %s", field, s, fam)
	}
	if err := checkUnicast(a); err != nil {
		return netip.Addr{}, err
	}
	return a, nil
}

// checkUnique refuses two entries with one owner and two owners of one
// address. Either means the record is corrupt: trusting it would hand an
// address to two pods or lose track of one. list names the entries in
// errors ("assignments" gives "assignments[3]").
func checkUnique(entries []Entry, list string) error {
	byKey := make(map[ipam.Key]int, len(entries))
	byAddr := make(map[netip.Addr]int, len(entries))
	for i, e := range entries {
		if j, ok := byKey[e.Key]; ok {
			return fmt.Errorf("%s[%d] and %s[%d] both record owner %s (addresses %s and %s); an owner holds one address",
				list, j, list, i, e.Key, entries[j].Addr, e.Addr)
		}
		if j, ok := byAddr[e.Addr]; ok {
			return fmt.Errorf("address %s is held by two owners: %s[%d] (%s) and %s[%d] (%s)",
				e.Addr, list, j, entries[j].Key, list, i, e.Key)
		}
		byKey[e.Key] = i
		byAddr[e.Addr] = i
	}
	return nil
}

// checkReleases refuses an address released twice, released while an
// entry holds it, or one no pod could hold: the record is corrupt.
func checkReleases(rel []Release, entries []Entry, list string) error {
	held := make(map[netip.Addr]bool, len(entries))
	for _, e := range entries {
		held[e.Addr] = true
	}
	seen := make(map[netip.Addr]int, len(rel))
	for i, r := range rel {
		if err := checkFamily(r.Addr); err != nil {
			return fmt.Errorf("%s[%d]: %w", list, i, err)
		}
		if err := checkUnicast(r.Addr); err != nil {
			return fmt.Errorf("%s[%d]: %w", list, i, err)
		}
		if !writableTime(r.At) {
			return fmt.Errorf("%s[%d]: release time %s is outside years 0-9999", list, i, r.At)
		}
		if j, ok := seen[r.Addr]; ok {
			return fmt.Errorf("address %s is released twice: %s[%d] and %s[%d]", r.Addr, list, j, list, i)
		}
		if held[r.Addr] {
			return fmt.Errorf("address %s is both released (%s[%d]) and held by an assignment", r.Addr, list, i)
		}
		seen[r.Addr] = i
	}
	return nil
}
