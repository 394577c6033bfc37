// Package simtest starts the local cloud for tests of code that talks to
// EC2 and IMDS through the real SDK: the emulator from a topology, served
// on loopback, closed when the test ends, with the SDK kept away from the
// developer's own AWS configuration.
package simtest

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/vpcnet/vpcnet/sim"
)

// New builds the cloud a topology (YAML, as in sim/README.md) describes;
// it is closed when t ends.
func New(t testing.TB, topology string, opts sim.Options) *sim.Cloud {
	t.Helper()
	topo, err := sim.ParseTopology([]byte(topology))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCloud(topo, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Serve serves h on a loopback port until t ends and returns its URL:
// c.EC2Handler() for an EC2 endpoint, c.IMDSHandler(id) for an
// instance's IMDS.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// IsolateAWSEnv keeps the SDK from reading the developer's AWS config,
// credentials, region, endpoints and retry settings for the rest of t.
func IsolateAWSEnv(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_NEW_RETRIES_2026"} {
		t.Setenv(k, "")
	}
}

// ConnectionRetryer retries a call only when its connection failed under
// it, at once and at most twice, so a test sees every answer EC2 sent as
// EC2 sent it. net/http can close a kept-alive connection just as the SDK
// reads an answer from it ("use of closed network connection",
// aws-sdk-go-v2 #2737); production's standard retryer retries that too,
// while aws.NopRetryer turned it into a test failure on a loaded machine.
func ConnectionRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		o.RateLimiter = ratelimit.None
	})
}

// HTTPClient opens a new connection for every call. A kept-alive
// connection can fail just as the answer arrives, after the emulator has
// acted on the call; ConnectionRetryer then sends it again, and a call
// that is not idempotent (AssignPrivateIpAddresses) fails as a double
// (TestPrefixesAreAlignedAndFailWhenFragmented saw 40+39 addresses on one
// ENI in CI). Loopback connections are cheap; a test's answer is worth
// more.
func HTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.DisableKeepAlives = true
	})
}
