package cloud

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Tags vpcnet puts on every ENI it creates, so a leak collector can tell
// its own available ENIs (owner, cluster) and their age from anyone else's.
const (
	TagInstanceID  = "vpcnet.io/instance-id"
	TagClusterName = "vpcnet.io/cluster-name"
	TagCreatedAt   = "vpcnet.io/created-at"
	// TagAWSInstanceID and TagAWSClusterName are the Amazon VPC CNI's, kept
	// so either system's leak collector recognises the other's ENIs during
	// a switch-over.
	TagAWSInstanceID  = "node.k8s.amazonaws.com/instance_id"
	TagAWSClusterName = "cluster.k8s.amazonaws.com/name"
)

// ownerTags are the tags of an ENI created by instanceID in cluster at
// createdAt. extra come first so ours win on a clash.
func ownerTags(instanceID, cluster string, createdAt time.Time, extra map[string]string) map[string]string {
	tags := maps.Clone(extra)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[TagInstanceID] = instanceID
	tags[TagAWSInstanceID] = instanceID
	tags[TagCreatedAt] = createdAt.UTC().Format(time.RFC3339)
	if cluster != "" {
		tags[TagClusterName] = cluster
		tags[TagAWSClusterName] = cluster
	}
	return tags
}

// ec2Tags sorts by key so the request, and so the ClientToken check on
// EC2's side, is the same on every retry.
func ec2Tags(tags map[string]string) []types.Tag {
	var out []types.Tag
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

// clientToken derives the ClientToken of a create from everything that
// makes it one logical create: the owner and every request parameter,
// CreatedAt to the nanosecond included. The same input always gives the
// same token (so a retry returns the ENI the first try made), and creates
// made at different times give different ones. EC2 takes up to 64 ASCII
// characters.
func clientToken(instanceID, cluster string, in CreateENIInput) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	num := func(v int64) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	field(instanceID)
	field(cluster)
	field(in.SubnetID)
	groups := slices.Sorted(slices.Values(in.SecurityGroups))
	num(int64(len(groups)))
	for _, g := range groups {
		field(g)
	}
	field(in.Description)
	num(int64(in.SecondaryAddresses))
	num(int64(in.Prefixes))
	if !in.ConnTrack.IsZero() {
		// Only when set: a create without timeouts keeps the token an
		// agent before them derived, so a create it left unanswered
		// is still recognised by EC2 after an upgrade.
		num(int64(in.ConnTrack.TCPEstablished))
		num(int64(in.ConnTrack.UDPStream))
		num(int64(in.ConnTrack.UDP))
	}
	num(in.CreatedAt.UnixNano())
	keys := slices.Sorted(maps.Keys(in.Tags))
	num(int64(len(keys)))
	for _, k := range keys {
		field(k)
		field(in.Tags[k])
	}
	return "vpcnet-" + hex.EncodeToString(h.Sum(nil))[:48]
}
