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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

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

// EC2Client is an SDK client signing with access key ID key whose calls
// h (c.EC2Handler() or c.EC2HandlerFor(id)) answers in process. No
// connection lies between them, so none can fail under a call after the
// emulator acted on it and no retry can send a call twice: a test sees
// each call made once and each answer as EC2 sent it. Over loopback TCP,
// a connection failing just as the answer arrived under a loaded CI
// machine made the retryer send AssignPrivateIpAddresses again, and
// TestPrefixesAreAlignedAndFailWhenFragmented saw 40+39 addresses on
// one ENI, with kept-alive connections and then with one per call.
func EC2Client(h http.Handler, key string) *ec2.Client {
	return ec2.NewFromConfig(aws.Config{
		Region:       "us-west-2",
		Credentials:  credentials.NewStaticCredentialsProvider(key, "secret", ""),
		BaseEndpoint: aws.String("http://ec2.sim.invalid"),
		Retryer:      func() aws.Retryer { return aws.NopRetryer{} },
		HTTPClient:   inProcess{h},
	})
}

// inProcess hands each request to a handler and returns its answer.
type inProcess struct{ h http.Handler }

func (c inProcess) Do(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
