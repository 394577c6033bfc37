package introspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxBody bounds what the client reads from one endpoint: a node with
// 250 pods answers /v1/enis in well under 1 MiB.
const maxBody = 8 << 20

// Client reads one agent's introspection endpoint.
type Client struct {
	// Base is the agent's address: "127.0.0.1:61679", or a URL
	// ("http://127.0.0.1:61679", or an API server proxy path).
	Base string
	// HTTP is the client to use; nil means one with a 10 s timeout.
	HTTP *http.Client
}

// URL is Base as an http URL without a trailing slash.
func (c *Client) URL() string {
	b := c.Base
	if b == "" {
		b = DefaultAddr
	}
	if !strings.Contains(b, "://") {
		b = "http://" + b
	}
	return strings.TrimSuffix(b, "/")
}

// UnreachableError says the agent did not answer at all, as opposed to
// answering with an error: a script tells "agent down" from "agent sick".
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("vpcnetd not reachable at %s: %v (is it running on this node? the agent listens on INTROSPECTION_BIND_ADDRESS, default %s)", e.URL, e.Err, DefaultAddr)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// IsUnreachable says whether err means the agent did not answer.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}

// Get fetches path ("/v1/status") and returns the raw body. A 503 from
// /readyz is an answer, not an error.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	url := c.URL() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &UnreachableError{URL: url, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK && !(path == "/readyz" && resp.StatusCode == http.StatusServiceUnavailable) {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

func getJSON[T any](ctx context.Context, c *Client, path string) (T, error) {
	var v T
	body, err := c.Get(ctx, path)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("GET %s%s: decode: %w", c.URL(), path, err)
	}
	return v, nil
}

// Status reads /v1/status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	return getJSON[Status](ctx, c, "/v1/status")
}

// ENIs reads /v1/enis.
func (c *Client) ENIs(ctx context.Context) ([]ENI, error) { return getJSON[[]ENI](ctx, c, "/v1/enis") }

// Pods reads /v1/pods.
func (c *Client) Pods(ctx context.Context) ([]Hold, error) {
	return getJSON[[]Hold](ctx, c, "/v1/pods")
}

// Config reads /v1/config.
func (c *Client) Config(ctx context.Context) ([]Setting, error) {
	return getJSON[[]Setting](ctx, c, "/v1/config")
}

// Readyz reads /readyz.
func (c *Client) Readyz(ctx context.Context) (Readyz, error) {
	return getJSON[Readyz](ctx, c, "/readyz")
}
