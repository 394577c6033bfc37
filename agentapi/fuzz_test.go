package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzRequest feeds the server what any local process could write to the
// socket: it never panics, and every request either reaches a handler
// with its body decoded or is answered with a coded error.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"method":"Add","body":{"containerId":"c1","netns":"/proc/1/ns/net","ifName":"eth0","podName":"p","podNamespace":"default"}}`,
		`{"method":"Del","body":{"containerId":"c1","attachment":{"containerId":"c1"}}}`,
		`{"method":"GC","body":{"network":"aws-cni","valid":[{"containerId":"c1","ifName":"eth0"}]}}`,
		`{"method":"Status"}`,
		`{"method":"Add","body":[1,2,3]}`,
		`{"method":"Nope"}`,
		`{"method":`,
		``,
	} {
		f.Add([]byte(seed))
	}
	s := NewServer(&handler{})
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := readRequest(bytes.NewReader(data))
		if err == nil {
			var out any
			out, err = s.dispatch(context.Background(), req)
			if err == nil {
				if _, merr := json.Marshal(out); merr != nil {
					t.Fatalf("reply to %q does not encode: %v", data, merr)
				}
				return
			}
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("request %q failed without a code: %v", data, err)
		}
	})
}
