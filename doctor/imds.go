package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// DefaultIMDSEndpoint is where IMDS answers on every EC2 instance.
const DefaultIMDSEndpoint = "http://169.254.169.254"

// IMDSReader reads instance metadata with IMDSv2, and asks once without
// a token to learn whether IMDSv1 is allowed.
type IMDSReader struct {
	Endpoint string
	Timeout  time.Duration
}

var _ Metadata = IMDSReader{}

// Metadata implements Metadata.
func (r IMDSReader) Metadata(ctx context.Context) (IMDSFacts, error) {
	ep := r.Endpoint
	if ep == "" {
		ep = DefaultIMDSEndpoint
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 3 * time.Second
	}
	c := imds.New(imds.Options{Endpoint: ep, EnableFallback: aws.FalseTernary,
		HTTPClient: &http.Client{Timeout: timeout}})
	get := func(path string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
		if err != nil {
			return "", fmt.Errorf("IMDS %s at %s (on a node, a hop limit of 1 or a disabled endpoint blocks it from containers): %w", path, ep, err)
		}
		defer out.Content.Close()
		b, err := io.ReadAll(out.Content)
		if err != nil {
			return "", fmt.Errorf("IMDS %s: %w", path, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var m IMDSFacts
	var err error
	if m.InstanceID, err = get("instance-id"); err != nil {
		return m, err // nothing else will answer either
	}
	for path, dst := range map[string]*string{
		"instance-type":               &m.InstanceType,
		"placement/availability-zone": &m.Zone,
		"local-hostname":              &m.LocalHostname,
	} {
		if *dst, err = get(path); err != nil {
			return m, err
		}
	}
	if m.Region, err = get("placement/region"); err != nil && len(m.Zone) > 1 {
		m.Region = m.Zone[:len(m.Zone)-1]
	}
	roles, err := get("iam/security-credentials/")
	switch {
	case err == nil:
		m.Role, _, _ = strings.Cut(roles, "\n")
	case notFound(err):
		// No instance profile.
	default:
		m.RoleErr = err.Error()
	}
	m.V1Allowed = v1Allowed(ctx, ep, timeout)
	readIPv6(get, &m)
	return m, nil
}

// readIPv6 reads what IMDS serves for IPv6 under the primary MAC: a 404
// means none, as EC2 answers for an interface without IPv6.
func readIPv6(get func(string) (string, error), m *IMDSFacts) {
	mac, err := get("mac")
	if err != nil {
		m.IPv6Err = err.Error()
		return
	}
	m.MAC = mac
	base := "network/interfaces/macs/" + mac + "/"
	ips, err := get(base + "ipv6s")
	switch {
	case notFound(err):
	case err != nil:
		m.IPv6Err = err.Error()
		return
	default:
		for _, l := range strings.Fields(ips) {
			if a, err := netip.ParseAddr(l); err == nil {
				m.IPv6s = append(m.IPv6s, a)
			}
		}
	}
	prefixes, err := get(base + "ipv6-prefix")
	switch {
	case notFound(err):
	case err != nil:
		m.IPv6Err = err.Error()
	default:
		for _, l := range strings.Fields(prefixes) {
			if p, err := netip.ParsePrefix(l); err == nil {
				m.IPv6Prefixes = append(m.IPv6Prefixes, p)
			}
		}
	}
}

func notFound(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// v1Allowed asks for the instance ID without a session token: 200 means
// IMDSv1 answers, 401 that tokens are required. nil if it cannot tell.
func v1Allowed(ctx context.Context, ep string, timeout time.Duration) *bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(ep, "/")+"/latest/meta-data/instance-id", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	resp.Body.Close()
	var v bool
	switch resp.StatusCode {
	case http.StatusOK:
		v = true
	case http.StatusUnauthorized:
		v = false
	default:
		return nil
	}
	return &v
}
