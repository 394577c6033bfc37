package kube

import (
	"net/http"
	"sync/atomic"
)

// reachWhat is the failure a request that got no answer is reported as.
const reachWhat = "reach the API server"

// reachTracker sees every request's fate at the transport. Informers
// retry a refused watch by themselves, with backoff and without telling
// their error handler, so once every watch is open nothing else would
// notice an API server that stopped. Its Client is set once built.
type reachTracker struct {
	c atomic.Pointer[Client]
}

func (r *reachTracker) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		c := r.c.Load()
		switch {
		case c == nil || req.Context().Err() != nil:
			// Not running yet, or given up on by the caller (shutdown, a
			// probe's timeout), which reports it itself.
		case err != nil:
			c.noteAPI(reachWhat, err)
		case resp.StatusCode < http.StatusInternalServerError:
			c.noteAnswer()
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// noteAnswer records that the API server answered, if that is news: a
// healthy API server costs a lock per request and no notification.
func (c *Client) noteAnswer() {
	c.mu.Lock()
	_, failed := c.errs[reachWhat]
	news := failed || !c.reachable
	c.mu.Unlock()
	if news {
		c.noteAPI(reachWhat, nil)
	}
}
