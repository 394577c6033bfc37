package sim

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// imdsHistory keeps what IMDS would have shown an instance over time, so
// a read at t can show the state of t-imdsLag: EC2 changes reach IMDS
// late, and the agent must not trust IMDS alone.
type imdsHistory struct {
	entries []imdsEntry // oldest first
	// fp fingerprints what the last entry was built from, and acc sums
	// the fingerprints of the instance's ENIs during one recording pass:
	// rebuilding every instance's files on every request made the
	// emulator quadratic in the number of instances.
	fp, acc uint64
}

type imdsEntry struct {
	at    time.Time
	files map[string]string
}

// recordIMDSLocked appends each instance's current metadata to its
// history when it changed.
func (c *Cloud) recordIMDSLocked(now time.Time) {
	for _, in := range c.instanceOrder {
		in.imds.acc = 0
	}
	for _, e := range c.enis {
		if e.att != nil {
			e.att.instance.imds.acc += e.fingerprint()
		}
	}
	for _, in := range c.instanceOrder {
		h := &in.imds
		fp := mix(h.acc, uint64(len(c.vpcIPv6)), hashString(in.state), hashString(strings.Join(in.primaryENI.groups, ",")), uint64(in.primaryENI.primary.As4()[3]))
		if n := len(h.entries); n == 0 || fp != h.fp {
			files := c.imdsFilesLocked(in)
			if n == 0 || !reflect.DeepEqual(h.entries[n-1].files, files) {
				h.entries = append(h.entries, imdsEntry{at: now, files: files})
			}
			h.fp = fp
		}
		if len(h.entries) > 1 {
			h.prune(now.Add(-c.imdsLag))
		}
	}
}

// fingerprint hashes everything of an attached ENI that IMDS shows, so an
// unchanged instance is not rebuilt. Instances sum their ENIs' prints, so
// the order ENIs are visited in does not matter.
func (e *eni) fingerprint() uint64 {
	h := fold(fnvOffset, uint64(e.seq))
	h = fold(h, hashString(e.status))
	h = fold(h, uint64(e.att.deviceIndex)<<8|uint64(e.att.cardIndex))
	h = fold(h, hashString(e.subnet.id))
	for _, g := range e.groups {
		h = fold(h, hashString(g))
	}
	for _, a := range e.secondaries {
		b := a.As4()
		h = fold(h, uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3]))
	}
	for _, q := range e.prefixes {
		b := q.Addr().As4()
		h = fold(h, uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3])|uint64(q.Bits())<<32)
	}
	for _, a := range e.ipv6s {
		h = fold(h, hostOffset(a))
	}
	for _, q := range e.ipv6Prefixes {
		h = fold(h, hostOffset(q.Addr())^0x80)
	}
	// A subnet's /64 (AssociateSubnetCidrBlock) and the VPC's blocks
	// (AssociateVpcCidrBlock) change what IMDS shows for the ENI too.
	if e.subnet.ipv6 != nil {
		h = fold(h, hashString(e.subnet.ipv6.cidr.String()))
	}
	return h
}

const fnvOffset = 14695981039346656037

// mix folds values into one FNV-1a style hash.
func mix(vs ...uint64) uint64 {
	h := uint64(fnvOffset)
	for _, v := range vs {
		h = fold(h, v)
	}
	return h
}

func fold(h, v uint64) uint64 {
	h ^= v
	h *= 1099511628211
	return h ^ h>>29
}

func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// prune drops entries that no read at or after cutoff can show, and
// returns the one a read at cutoff shows: the latest at or before it, or
// the oldest if all are newer.
func (h *imdsHistory) prune(cutoff time.Time) imdsEntry {
	i := 0
	for j, e := range h.entries {
		if !e.at.After(cutoff) {
			i = j
		}
	}
	h.entries = h.entries[i:]
	return h.entries[0]
}

// imdsFiles returns the metadata of instance id as IMDS shows it now: the
// latest state at least imdsLag old (or the first known state, for a read
// within the lag of launch). Older history is dropped.
func (c *Cloud) imdsFiles(id string) (map[string]string, bool) {
	var files map[string]string
	c.read(func(now time.Time) error {
		in, ok := c.instances[id]
		if !ok {
			return nil
		}
		files = in.imds.prune(now.Add(-c.imdsLag)).files
		return nil
	})
	return files, files != nil
}

// imdsFilesLocked renders the instance's metadata tree, path to content,
// relative to /latest/. Directories are implied by the paths.
func (c *Cloud) imdsFilesLocked(in *instance) map[string]string {
	md := "meta-data/"
	f := map[string]string{
		md + "ami-id":                      "ami-0000000000000sim",
		md + "instance-id":                 in.id,
		md + "instance-type":               in.typ.name,
		md + "placement/availability-zone": in.subnet.az,
		md + "placement/region":            c.region,
		md + "services/domain":             "amazonaws.com",
	}
	var vpcCIDRs, vpc6 []string
	for _, p := range c.vpcCIDRs {
		vpcCIDRs = append(vpcCIDRs, p.String())
	}
	for _, b := range c.vpcIPv6 {
		vpc6 = append(vpc6, b.cidr.String())
	}
	primary := in.primaryENI
	if in.state == instanceRunning {
		f[md+"local-ipv4"] = primary.primary.String()
		f[md+"local-hostname"] = c.privateDNS(primary.primary.String())
		f[md+"hostname"] = c.privateDNS(primary.primary.String())
		f[md+"mac"] = primary.mac
		f[md+"security-groups"] = strings.Join(primary.groups, "\n")
		// The instance's IPv6 address: the primary ENI's first, as EC2
		// shows it, and absent when it has none.
		if len(primary.ipv6s) > 0 {
			f[md+"ipv6"] = primary.ipv6s[0].String()
		}
	}
	for _, e := range c.attachedENIsLocked(in) {
		if e.status == statusAttaching {
			continue // not on the instance yet
		}
		dir := md + "network/interfaces/macs/" + e.mac + "/"
		var ips, prefixes []string
		for _, a := range e.addresses() {
			ips = append(ips, a.String())
		}
		for _, q := range e.prefixes {
			prefixes = append(prefixes, q.String())
		}
		f[dir+"device-number"] = fmt.Sprint(e.att.deviceIndex)
		f[dir+"network-card"] = fmt.Sprint(e.att.cardIndex)
		f[dir+"interface-id"] = e.id
		f[dir+"mac"] = e.mac
		f[dir+"owner-id"] = c.accountID
		// An efa-only interface has no IP address: IMDS has no
		// local-ipv4s for it.
		if len(ips) > 0 {
			f[dir+"local-ipv4s"] = strings.Join(ips, "\n")
			f[dir+"local-hostname"] = c.privateDNS(e.primary.String())
		}
		f[dir+"security-group-ids"] = strings.Join(e.groups, "\n")
		f[dir+"security-groups"] = strings.Join(e.groups, "\n")
		f[dir+"subnet-id"] = e.subnet.id
		f[dir+"subnet-ipv4-cidr-block"] = e.subnet.cidr.String()
		f[dir+"vpc-id"] = c.vpcID
		f[dir+"vpc-ipv4-cidr-block"] = vpcCIDRs[0]
		f[dir+"vpc-ipv4-cidr-blocks"] = strings.Join(vpcCIDRs, "\n")
		if len(prefixes) > 0 {
			f[dir+"ipv4-prefix"] = strings.Join(prefixes, "\n")
		}
		c.imdsIPv6Locked(f, dir, e, vpc6)
	}
	doc, _ := json.MarshalIndent(map[string]any{
		"accountId":        c.accountID,
		"architecture":     "x86_64",
		"availabilityZone": in.subnet.az,
		"imageId":          "ami-0000000000000sim",
		"instanceId":       in.id,
		"instanceType":     in.typ.name,
		"pendingTime":      ec2Time(in.launched),
		"privateIp":        primary.primary.String(),
		"region":           c.region,
		"version":          "2017-09-30",
	}, "", "  ")
	f["dynamic/instance-identity/document"] = string(doc)
	return f
}

// imdsIPv6Locked adds the IPv6 entries of an ENI's directory as EC2's
// IMDS has them: ipv6s and ipv6-prefix only when the ENI holds IPv6
// addresses or /80 prefixes, subnet-ipv6-cidr-blocks whenever its subnet
// has a /64 and vpc-ipv6-cidr-blocks whenever the VPC has a block, with
// or without addresses on the ENI; lists one item a line.
func (c *Cloud) imdsIPv6Locked(f map[string]string, dir string, e *eni, vpc6 []string) {
	var ips, prefixes []string
	for _, a := range e.ipv6s {
		ips = append(ips, a.String())
	}
	for _, q := range e.ipv6Prefixes {
		prefixes = append(prefixes, q.String())
	}
	if len(ips) > 0 {
		f[dir+"ipv6s"] = strings.Join(ips, "\n")
	}
	if len(prefixes) > 0 {
		f[dir+"ipv6-prefix"] = strings.Join(prefixes, "\n")
	}
	if e.subnet.ipv6 != nil {
		f[dir+"subnet-ipv6-cidr-blocks"] = e.subnet.ipv6.cidr.String()
	}
	if len(vpc6) > 0 {
		f[dir+"vpc-ipv6-cidr-blocks"] = strings.Join(vpc6, "\n")
	}
}
