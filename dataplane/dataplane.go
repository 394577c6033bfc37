package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
)

// Options configure a Dataplane.
type Options struct {
	// Log receives what the dataplane changed; nil discards.
	Log *slog.Logger
	// NetNS is the path of the node's network namespace. Empty means the
	// namespace of the OS thread that makes each call.
	NetNS string
	// VethPrefix starts every host-side pod veth name ("eni" when empty;
	// AWS_VPC_K8S_CNI_VETHPREFIX). Rules match pod traffic by it.
	VethPrefix string
	// LinkWait bounds how long SetupENI waits for a just-attached ENI's
	// interface to appear when the context has no deadline (30s when zero).
	LinkWait time.Duration
	// PollInterval is the pause between looks for that interface (200ms
	// when zero).
	PollInterval time.Duration
	// IPv6Policy says the node's pods are IPv6 (ENABLE_IPv6): SetPolicy
	// writes table ip6 vpcnet-policy, and PolicyDrops reads it, rather
	// than table ip vpcnet-policy.
	IPv6Policy bool
	// EgressV4Policy, with IPv6Policy, says the pods have IPv4 egress
	// veths (ENABLE_V4_EGRESS): SetPolicy judges their IPv4 egress in
	// table ip vpcnet-policy too (policyv4egress.go).
	EgressV4Policy bool
}

// Dataplane configures the networking of one node. It holds no kernel
// handles between calls, so it is safe for concurrent use; concurrent
// SetupHost calls race like any two writers of the same state.
type Dataplane struct {
	log          *slog.Logger
	nsPath       string
	vethPrefix   string
	linkWait     time.Duration
	pollInterval time.Duration
	// notFound, if set, runs after each look that did not find the
	// awaited interface (tests use it to make the interface appear
	// while SetupENI waits).
	notFound func()

	policyMu sync.Mutex // one writer of the policy table at a time; guards policy and policyConn
	policy   policyState
	// policyV4 is table ip vpcnet-policy of an IPv6 node (its pods'
	// IPv4 egress, policyv4egress.go); guarded by policyMu.
	policyV4 egressV4PolicyState
	// egressV4Policy is Options.EgressV4Policy on an IPv6 node, and
	// egressV4Renders its chains last rendered (guarded by policyMu).
	egressV4Policy  bool
	egressV4Renders egressV4Renders
	policyConn      *nftConn // kept between policy writes
	// peerRenders keeps rendered peer sets between policy writes.
	peerRenders peerRenders
	// policyWrites counts SetPolicy calls that committed a transaction:
	// tests see by it that a call with nothing to change wrote nothing.
	policyWrites atomic.Int64
	// policyReads counts the policy writes that listed the table first:
	// tests see by it that a write of map entries alone (an ADD's, a
	// DEL's) reads nothing.
	policyReads atomic.Int64
	// policyV4Rewrites counts the whole rewrites of table ip
	// vpcnet-policy of an IPv6 node, for tests.
	policyV4Rewrites atomic.Int64
}

// New validates opts and returns a Dataplane.
func New(opts Options) (*Dataplane, error) {
	d := &Dataplane{
		log:          opts.Log,
		nsPath:       opts.NetNS,
		vethPrefix:   opts.VethPrefix,
		linkWait:     opts.LinkWait,
		pollInterval: opts.PollInterval,
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if opts.IPv6Policy {
		d.peerRenders.fam = policyIPv6
		d.egressV4Policy = opts.EgressV4Policy
	}
	if d.vethPrefix == "" {
		d.vethPrefix = DefaultVethPrefix
	}
	if err := ValidateVethPrefix(d.vethPrefix); err != nil {
		return nil, err
	}
	if d.linkWait == 0 {
		d.linkWait = 30 * time.Second
	}
	if d.pollInterval == 0 {
		d.pollInterval = 200 * time.Millisecond
	}
	return d, nil
}

// session holds one call's handles on the node's namespace.
type session struct {
	ns  ns.NetNS
	nl  *nlHandle
	nft *nftConn
}

func (d *Dataplane) open(ctx context.Context) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var target ns.NetNS
	var err error
	if d.nsPath != "" {
		target, err = ns.GetNS(d.nsPath)
	} else {
		target, err = ns.GetCurrentNS()
	}
	if err != nil {
		return nil, fmt.Errorf("open node network namespace: %w", err)
	}
	nl, err := newNL(target)
	if err != nil {
		_ = target.Close()
		return nil, err
	}
	return &session{ns: target, nl: nl}, nil
}

// nftables opens the nf_tables connection on first use; pod operations
// never need one.
func (s *session) nftables() (*nftConn, error) {
	if s.nft == nil {
		c, err := newNFT(s.ns)
		if err != nil {
			return nil, err
		}
		s.nft = c
	}
	return s.nft, nil
}

func (s *session) close() {
	if s.nft != nil {
		s.nft.close()
	}
	s.nl.close()
	_ = s.ns.Close()
}

// setSysctl writes a sysctl of the session's namespace; /proc/sys/net shows
// the namespace of the thread that opens it, hence ns.Do.
func (s *session) setSysctl(name, value string) error {
	return s.ns.Do(func(ns.NetNS) error {
		got, err := sysctl.Sysctl(name)
		if err == nil && got == value {
			return nil
		}
		if _, err := sysctl.Sysctl(name, value); err != nil {
			return fmt.Errorf("set sysctl %s=%s: %w", name, value, err)
		}
		return nil
	})
}

// openPodNS opens a pod's namespace. A missing path comes back as
// ErrNetNSNotFound so deletions can treat it as done.
func openPodNS(path string) (ns.NetNS, error) {
	p, err := ns.GetNS(path)
	if err != nil {
		var missing ns.NSPathNotExistErr
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("pod network namespace %s: %w", path, ErrNetNSNotFound)
		}
		return nil, fmt.Errorf("open pod network namespace %s: %w", path, err)
	}
	return p, nil
}

// ErrNetNSNotFound says a pod's network namespace path does not exist.
var ErrNetNSNotFound = errors.New("namespace does not exist")
