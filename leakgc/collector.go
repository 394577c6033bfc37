// Package leakgc collects leaked ENIs: ENIs vpcnet created that were left
// available (detached) by a node that died between detach and delete, or
// between create and attach. Such an ENI holds subnet addresses until
// someone deletes it. The collector finds the available ENIs carrying
// vpcnet's tags, waits out a grace period from their created-at tag, and
// deletes them under its own rate limit. It never deletes an attached ENI
// and never forces anything.
package leakgc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/cloud"
)

// Cloud is the part of EC2 the collector uses. *cloud.Client implements
// it.
type Cloud interface {
	ListENIs(ctx context.Context, f cloud.ENIFilter) ([]cloud.ENI, error)
	DeleteENI(ctx context.Context, eniID string) error
}

var _ Cloud = (*cloud.Client)(nil)

// Limiter paces deletes. *rate.Limiter is one.
type Limiter interface {
	Wait(ctx context.Context) error
}

var _ Limiter = (*rate.Limiter)(nil)

const (
	// DefaultGrace is how old an available ENI must be before it counts
	// as leaked.
	DefaultGrace = 10 * time.Minute
	// MinGrace is the shortest grace allowed. An agent creates an ENI and
	// then attaches it; with throttling and retries that takes up to one
	// call timeout (30 s), and a grace shorter than that would delete
	// ENIs other agents are about to attach.
	MinGrace = time.Minute
	// DefaultInterval is the time between scans. With ClusterName set
	// every node lists the whole cluster's available ENIs, so the account
	// pays nodes/interval DescribeNetworkInterfaces calls: 5,000 nodes at
	// 30 minutes is 2.8 calls/s, 14% of EC2's default Describe refill of
	// 20/s, shared by everything in the account. A leak is found by
	// whichever node scans first, so in a cluster of N nodes it waits
	// about interval/N after the grace, and a leak that waits longer
	// costs only some idle addresses.
	DefaultInterval = 30 * time.Minute
	// DefaultMaxPerScan bounds the deletes of one scan, so a mass leak
	// (a whole node group lost) is drained over several scans by many
	// nodes instead of one node spending the account's mutating budget.
	DefaultMaxPerScan = 20
	// DefaultDeleteRate is the collector's own pace of deletes per
	// second, burst 1, on top of the cloud client's per-action buckets:
	// collection is never urgent and must not starve the agent's attach
	// and assign calls.
	DefaultDeleteRate = rate.Limit(1)
)

// Options configure a Collector. Cloud and one of ClusterName or
// InstanceID are required; the zero value of every other field is a
// working production default.
type Options struct {
	Cloud Cloud
	// ClusterName, when set, makes the collector take every available
	// ENI tagged with this cluster (cloud.TagClusterName), whichever
	// instance created it: other, dead, nodes' leaks. When empty it takes
	// only ENIs tagged as created by InstanceID, so it never touches an
	// ENI of another cluster.
	ClusterName string
	// InstanceID is this node's instance. Required without ClusterName;
	// with it, used only to tell own leaks from others' in the log.
	InstanceID string
	// Grace is how long after its created-at tag an available ENI is left
	// alone. Zero means DefaultGrace; less than MinGrace is an error.
	Grace time.Duration
	// Interval between scans in Run. Zero means DefaultInterval.
	Interval time.Duration
	// Jitter spreads the scans of a cluster's nodes: the first scan comes
	// after a random delay in [0, Jitter), each later one after Interval
	// plus a random offset in [-Jitter/2, Jitter/2). Zero means
	// Interval/2; negative means none. It may not exceed Interval.
	Jitter time.Duration
	// Rand draws the jitter and the order of deletes. Nil means a
	// randomly seeded source; pass a seeded one for deterministic tests.
	Rand *rand.Rand
	// DeleteLimiter paces deletes. Nil means DefaultDeleteRate, burst 1.
	DeleteLimiter Limiter
	// MaxPerScan bounds deletes per scan. Zero means DefaultMaxPerScan.
	MaxPerScan int
	// OnCollected, if set, is called after each ENI the collector
	// deleted (not for ENIs someone else deleted first), for example to
	// emit a Kubernetes Event. It runs inside Scan and must not call Scan.
	OnCollected func(cloud.ENI)
	// Clock ages ENIs and spaces out scans: the agent's one clock. Nil
	// means the wall clock.
	Clock clock.Clock
	// Logger receives one line per delete and per scan. Nil discards.
	Logger *slog.Logger
	// Registerer receives the vpcnet_leaked_eni* metrics. Nil means they
	// are kept but not registered.
	Registerer prometheus.Registerer
}

// Collector finds and deletes leaked ENIs. Scans are serialized: Run and
// a concurrent Scan (from vpcnetctl, say) never delete at the same time.
type Collector struct {
	cloud       Cloud
	clusterName string
	instanceID  string
	grace       time.Duration
	interval    time.Duration
	jitter      time.Duration
	limiter     Limiter
	maxPerScan  int
	onCollected func(cloud.ENI)
	clk         clock.Clock
	log         *slog.Logger
	metrics     *metrics

	// mu serializes scans and guards the fields below.
	mu  sync.Mutex
	rng *rand.Rand
	// unreadable holds the ENIs already reported for a missing or
	// unreadable created-at tag, so each is reported once, not every scan.
	unreadable map[string]bool
}

// New checks the options and returns a Collector, with its metrics
// registered.
func New(o Options) (*Collector, error) {
	o, err := withDefaults(o)
	if err != nil {
		return nil, fmt.Errorf("leaked ENI collector: %w", err)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("leaked ENI collector: %w", err)
	}
	return &Collector{
		cloud:       o.Cloud,
		clusterName: o.ClusterName,
		instanceID:  o.InstanceID,
		grace:       o.Grace,
		interval:    o.Interval,
		jitter:      o.Jitter,
		limiter:     o.DeleteLimiter,
		maxPerScan:  o.MaxPerScan,
		onCollected: o.OnCollected,
		clk:         o.Clock,
		log:         o.Logger,
		metrics:     m,
		rng:         o.Rand,
		unreadable:  map[string]bool{},
	}, nil
}

func withDefaults(o Options) (Options, error) {
	switch {
	case o.Cloud == nil:
		return o, errors.New("no cloud client: set Options.Cloud")
	case o.ClusterName == "" && o.InstanceID == "":
		return o, errors.New("no owner to collect for: set Options.ClusterName to collect the cluster's leaked ENIs, or Options.InstanceID to collect only this instance's")
	case o.Grace < 0 || (o.Grace > 0 && o.Grace < MinGrace):
		return o, fmt.Errorf("grace %s is shorter than %s: ENIs other agents are still attaching would be deleted", o.Grace, MinGrace)
	case o.Interval < 0:
		return o, fmt.Errorf("negative interval %s", o.Interval)
	case o.MaxPerScan < 0:
		return o, fmt.Errorf("negative MaxPerScan %d", o.MaxPerScan)
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	switch {
	case o.Jitter == 0:
		o.Jitter = o.Interval / 2
	case o.Jitter < 0:
		o.Jitter = 0
	case o.Jitter > o.Interval:
		return o, fmt.Errorf("jitter %s exceeds the interval %s: scans could come back to back", o.Jitter, o.Interval)
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.DeleteLimiter == nil {
		o.DeleteLimiter = rate.NewLimiter(DefaultDeleteRate, 1)
	}
	if o.MaxPerScan == 0 {
		o.MaxPerScan = DefaultMaxPerScan
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
