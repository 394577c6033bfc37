package sim

import (
	"crypto/rand"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// IMDSv2 headers.
const (
	imdsTokenHeader = "X-Aws-Ec2-Metadata-Token"
	imdsTTLHeader   = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	imdsMaxTTL      = 21600
)

// imdsTokens holds the session tokens handed out by PUT /latest/api/token.
// Their lifetime runs on the wall clock, not the cloud's clock: the IMDS
// client caches a token by the wall clock, and a fake cloud clock jumping
// ahead must not make every cached token fail.
type imdsTokens struct {
	now func() time.Time
	// mu guards byToken.
	mu      sync.Mutex
	byToken map[string]imdsToken
}

type imdsToken struct {
	instanceID string
	expires    time.Time
}

func newIMDSTokens() *imdsTokens {
	return &imdsTokens{now: time.Now, byToken: map[string]imdsToken{}}
}

func (t *imdsTokens) issue(instanceID string, ttl time.Duration) string {
	tok := rand.Text() + rand.Text()
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.byToken {
		if !now.Before(v.expires) {
			delete(t.byToken, k)
		}
	}
	t.byToken[tok] = imdsToken{instanceID: instanceID, expires: now.Add(ttl)}
	return tok
}

// valid reports whether tok was issued by instanceID's IMDS and is alive.
func (t *imdsTokens) valid(instanceID, tok string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.byToken[tok]
	return ok && v.instanceID == instanceID && t.now().Before(v.expires)
}

// IMDSHandler serves IMDSv2 for one instance: PUT /latest/api/token with
// X-aws-ec2-metadata-token-ttl-seconds (1 to 21600) returns a token, and
// every GET must carry it in X-aws-ec2-metadata-token or gets 401.
// Metadata lags EC2 by the topology's imdsLag. An unknown instance gets
// 404 for everything.
func (c *Cloud) IMDSHandler(instanceID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.serveIMDS(w, r, instanceID)
	})
}

func (c *Cloud) serveIMDS(w http.ResponseWriter, r *http.Request, instanceID string) {
	w.Header().Set("Content-Type", "text/plain")
	if r.URL.Path == "/latest/api/token" {
		c.serveIMDSToken(w, r, instanceID)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !c.tokens.valid(instanceID, r.Header.Get(imdsTokenHeader)) {
		http.Error(w, "unauthorized: IMDSv2 requires a session token from PUT /latest/api/token", http.StatusUnauthorized)
		return
	}
	files, ok := c.imdsFiles(instanceID)
	if !ok {
		http.NotFound(w, r)
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/latest/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if body, ok := files[path]; ok {
		w.Write([]byte(body))
		return
	}
	if list := listing(files, path); len(list) > 0 {
		w.Write([]byte(strings.Join(list, "\n")))
		return
	}
	http.NotFound(w, r)
}

func (c *Cloud) serveIMDSToken(w http.ResponseWriter, r *http.Request, instanceID string) {
	if r.Method != http.MethodPut {
		http.Error(w, "method not allowed: PUT for a token", http.StatusMethodNotAllowed)
		return
	}
	// IMDS refuses token requests that went through a proxy.
	if r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(imdsTTLHeader))
	if err != nil || ttl < 1 || ttl > imdsMaxTTL {
		http.Error(w, "bad request: "+imdsTTLHeader+" must be 1 to 21600", http.StatusBadRequest)
		return
	}
	tok := c.tokens.issue(instanceID, time.Duration(ttl)*time.Second)
	w.Header().Set(imdsTTLHeader, strconv.Itoa(ttl))
	w.Write([]byte(tok))
}

// listing returns the entries of directory dir ("meta-data/network/"), a
// trailing slash marking subdirectories, as IMDS lists them.
func listing(files map[string]string, dir string) []string {
	if dir != "" && !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	seen := map[string]bool{}
	for p := range files {
		rest, ok := strings.CutPrefix(p, dir)
		if !ok || rest == "" {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[:i+1]
		}
		seen[rest] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
