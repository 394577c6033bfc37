// Package cloud is the one EC2 and IMDS client of a vpcnet process. Every
// cloud call the agent makes goes through a *Client, which spends the
// account's shared EC2 API budget carefully: a client-side token bucket per
// action, the SDK's jittered exponential backoff on throttling, 5xx and
// timeouts, a deadline on every call, and a metric per call, retry and error
// code. Production and the local cloud differ only by endpoint override.
//
// Results are plain vpcnet types (net/netip addresses, string ids), never
// SDK types, so callers can define their own small interfaces over the
// methods they use and fake them in tests.
package cloud

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/limits"
)

// Defaults for the zero values of Options.
const (
	DefaultCallTimeout    = 30 * time.Second
	DefaultAttemptTimeout = 10 * time.Second
	DefaultMaxAttempts    = 10
	DefaultMaxBackoff     = 20 * time.Second
)

// Options configure a Client. The zero value of every field but Region and
// InstanceID (which New learns from IMDS) is a working production default.
type Options struct {
	// Region of the EC2 endpoint. Empty means the SDK's usual sources
	// (AWS_REGION, shared config), then IMDS.
	Region string
	// EC2Endpoint overrides the EC2 endpoint ("http://127.0.0.1:4566" for
	// the local cloud). Empty means the Region's AWS endpoint.
	EC2Endpoint string
	// IMDSEndpoint overrides the instance metadata endpoint, for IMDS
	// reads and for the default credential chain's instance role.
	IMDSEndpoint string
	// NoIMDS says the process does not run on an instance (vpcnetctl on a
	// laptop): New never asks IMDS, Region is required, and DescribeSelf
	// and CreateENI (which needs an owner) fail unless InstanceID is set.
	NoIMDS bool
	// Credentials for EC2. Nil means the SDK's default chain.
	Credentials aws.CredentialsProvider

	// InstanceID is the owner recorded in the tags of ENIs this client
	// creates. Empty means ask IMDS in New.
	InstanceID string
	// ClusterName is recorded in the tags of ENIs this client creates, so
	// a leak collector can find the cluster's own ENIs.
	ClusterName string

	// CallTimeout bounds one method call, retries and bucket waits
	// included.
	CallTimeout time.Duration
	// AttemptTimeout bounds one HTTP attempt, so a hung connection becomes
	// a retryable timeout instead of using up the whole CallTimeout.
	AttemptTimeout time.Duration
	// MaxAttempts is the number of attempts per call, the first included.
	MaxAttempts int
	// MaxBackoff caps the jittered exponential delay between attempts.
	MaxBackoff time.Duration
	// Buckets replace DefaultBuckets for the actions they name.
	Buckets map[string]Bucket
	// HTTPClient carries the requests to EC2 and IMDS. Nil means the
	// SDK's, with AttemptTimeout. A simulation passes one that calls the
	// local cloud's handlers in process.
	HTTPClient aws.HTTPClient

	// Registerer receives the vpcnet_ec2_* metrics. Nil means the metrics
	// are kept but not registered.
	Registerer prometheus.Registerer
	// Logger for retries and IMDS oddities. Nil means discard.
	Logger *slog.Logger
	// Now is the clock for the created-at tag. Nil means time.Now.
	Now func() time.Time
	// OnThrottled, when set, hears of every call EC2 answered
	// RequestLimitExceeded in the end (after retries), by action: the
	// cluster's budget controller is told, so it slows down.
	OnThrottled func(action string)
}

// Client is the process's one EC2 and IMDS client. It is safe for
// concurrent use.
type Client struct {
	ec2    *ec2.Client
	imds   *imds.Client
	noIMDS bool
	// imdsEndpoint is where IMDS is asked, for error messages.
	imdsEndpoint string
	region       string
	instanceID   string
	clusterName  string
	callTimeout  time.Duration
	buckets      *buckets
	metrics      *metrics
	log          *slog.Logger
	now          func() time.Time
	onThrottled  func(action string)
	// identity names the credentials' source and owner (Identity).
	identity string

	// limitsMu guards limitsCache: instance types learned from EC2.
	limitsMu    sync.Mutex
	limitsCache map[string]limits.Limits
}

// New builds the Client. It asks IMDS for the region and instance id when
// Options leave them empty and NoIMDS is false.
func New(ctx context.Context, o Options) (*Client, error) {
	o = withDefaults(o)
	b, err := newBuckets(o.Buckets)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	c := &Client{
		noIMDS:       o.NoIMDS,
		imdsEndpoint: cmp.Or(o.IMDSEndpoint, "http://169.254.169.254"),
		instanceID:   o.InstanceID,
		clusterName:  o.ClusterName,
		callTimeout:  o.CallTimeout,
		buckets:      b,
		metrics:      m,
		log:          o.Logger,
		now:          o.Now,
		onThrottled:  o.OnThrottled,
		limitsCache:  map[string]limits.Limits{},
	}

	var hc aws.HTTPClient = awshttp.NewBuildableClient().WithTimeout(o.AttemptTimeout)
	if o.HTTPClient != nil {
		hc = o.HTTPClient
	}
	cfg, identity, err := awsConfig(o, hc)
	if err != nil {
		return nil, fmt.Errorf("AWS config: %w", err)
	}
	c.identity = identity

	c.imds = imds.NewFromConfig(cfg, func(io *imds.Options) {
		if o.IMDSEndpoint != "" {
			io.Endpoint = o.IMDSEndpoint
		}
		// IMDSv2 only: a fallback to v1 would hide a hop limit that
		// blocks tokens, which the operator needs to see.
		io.EnableFallback = aws.FalseTernary
		// IMDS is local and unmetered; EC2's patient retryer would only
		// make an off-instance start slow to fail. It gets the SDK's
		// standard 3 attempts, fewer when the options ask for fewer (the
		// deterministic simulation asks for one: a retry there would
		// sleep on the wall clock).
		io.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = min(so.MaxAttempts, o.MaxAttempts)
			so.MaxBackoff = min(so.MaxBackoff, o.MaxBackoff)
		})
	})
	if err := c.learnFromIMDS(ctx, &cfg); err != nil {
		return nil, err
	}
	c.region = cfg.Region

	c.ec2 = ec2.NewFromConfig(cfg, func(eo *ec2.Options) {
		if o.EC2Endpoint != "" {
			eo.BaseEndpoint = aws.String(o.EC2Endpoint)
		}
		eo.APIOptions = append(eo.APIOptions, c.addAttemptMiddleware)
	})
	return c, nil
}

// Identity names where the client's credentials come from and whose they
// are, as far as the process can tell without asking AWS (a role ARN, a
// profile, a hash of an access key id; for the instance's role, only
// that): a change means EC2's answers about permissions may change too.
func (c *Client) Identity() string { return c.identity }

// Region is the region the client talks to.
func (c *Client) Region() string { return c.region }

// InstanceID is the owner recorded in the tags of created ENIs; empty when
// the client runs off-instance without one.
func (c *Client) InstanceID() string { return c.instanceID }

func withDefaults(o Options) Options {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// newRetryer is the SDK's standard retryer (jittered exponential backoff;
// RequestLimitExceeded, 5xx and connection errors and timeouts retryable)
// without its retry quota: the quota stops all retries after a burst of
// failures, which is exactly when EC2 throttles a busy account and a
// patient retry is what succeeds. Our token buckets do the pacing instead.
func newRetryer(maxAttempts int, maxBackoff time.Duration) aws.Retryer {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = maxAttempts
		so.MaxBackoff = maxBackoff
		so.RateLimiter = ratelimit.None
	})
}

// learnFromIMDS fills the region and instance id the options left empty.
func (c *Client) learnFromIMDS(ctx context.Context, cfg *aws.Config) error {
	if c.noIMDS {
		if cfg.Region == "" {
			return errors.New("no AWS region: set AWS_REGION (for example AWS_REGION=us-west-2); this program does not ask the instance metadata service")
		}
		return nil
	}
	if cfg.Region == "" {
		r, err := c.imdsRegion(ctx)
		if err != nil {
			return fmt.Errorf("learn the AWS region from the instance metadata service at %s (set AWS_REGION to skip this): %w; %s", c.imdsEndpoint, err, imdsCauses)
		}
		cfg.Region = r
	}
	if c.instanceID == "" {
		id, err := c.imdsGet(ctx, "instance-id")
		if err != nil {
			return fmt.Errorf("learn the instance ID from the instance metadata service at %s: %w; %s", c.imdsEndpoint, err, imdsCauses)
		}
		c.instanceID = id
	}
	return nil
}

// imdsCauses is what operators of the Amazon VPC CNI found behind an
// unanswered IMDS, in order of how often, with the fix for each.
const imdsCauses = "likely causes: the instance's metadata hop limit is 1 and this runs in a container without host networking " +
	"(run it with hostNetwork, or raise HttpPutResponseHopLimit to 2 with aws ec2 modify-instance-metadata-options); " +
	"IMDSv2 is required and the token PUT is blocked by a proxy or firewall (allow PUT to /latest/api/token; unset HTTP_PROXY for 169.254.169.254 with NO_PROXY); " +
	"the metadata service is off (HttpEndpoint=disabled); " +
	"or VPCNET_IMDS_ENDPOINT points elsewhere"
