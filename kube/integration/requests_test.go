package integration

import (
	"net/http"
	"net/url"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
)

// request is one HTTP request the layer made, named as RBAC names it.
type request struct {
	// perm is "verb resource" as RBAC authorizes it: "patch nodes",
	// "watch eniconfigs.crd.k8s.amazonaws.com", or for a non-resource
	// URL "get /version".
	perm  string
	url   *url.URL
	code  int // 0: no answer
	error string
}

// requestLog records every request that goes through its transport.
type requestLog struct {
	mu   sync.Mutex // guards reqs
	reqs []request
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		req := request{perm: permission(r), url: r.URL}
		if err != nil {
			req.error = err.Error()
		} else {
			req.code = resp.StatusCode
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, req)
		l.mu.Unlock()
		return resp, err
	})
}

func (l *requestLog) all() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]request(nil), l.reqs...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// permission names the RBAC verb and resource a request needs, as the
// apiserver's request info resolver does for the paths client-go uses:
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE]] and
// /apis/GROUP/VERSION/..., anything else a non-resource URL.
func permission(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) > 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return strings.ToLower(r.Method) + " " + r.URL.Path
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource := parts[0]
	if group != "" {
		resource += "." + group
	}
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	named := len(parts) > 1
	var verb string
	switch q := r.URL.Query().Get("watch"); {
	case r.Method == http.MethodGet && (q == "true" || q == "1"):
		verb = "watch"
	case r.Method == http.MethodGet && named:
		verb = "get"
	case r.Method == http.MethodGet:
		verb = "list"
	case r.Method == http.MethodPost:
		verb = "create"
	case r.Method == http.MethodPatch:
		verb = "patch"
	case r.Method == http.MethodPut:
		verb = "update"
	case r.Method == http.MethodDelete && named:
		verb = "delete"
	default:
		verb = strings.ToLower(r.Method)
	}
	return verb + " " + resource
}

// granted lists what a ClusterRole's rules allow, named as permission
// names requests.
func granted(rules []rbacv1.PolicyRule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if g != "" {
					res += "." + g
				}
				for _, v := range r.Verbs {
					out[v+" "+res] = true
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out[v+" "+u] = true
			}
		}
	}
	return out
}
