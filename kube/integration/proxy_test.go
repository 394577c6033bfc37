package integration

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// proxy forwards TCP connections on loopback to the API server, and can be
// cut, which to a client is the API server stopping: open connections
// close and new ones are refused; mended, it listens on the same address
// again. The shared API server keeps serving the other tests meanwhile.
type proxy struct {
	addr, target string

	mu    sync.Mutex // guards ln and conns
	ln    net.Listener
	conns map[net.Conn]bool
}

// newProxy proxies the API server at host (https://127.0.0.1:port) until
// the test ends; its url replaces host in a rest.Config.
func newProxy(t *testing.T, host string) *proxy {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: u.Host, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) url() string { return "https://" + p.addr }

// cut closes the listener and every connection.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// mend listens again on the same address.
func (p *proxy) mend(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			go p.forward(c)
		}
	}()
}

// forward copies bytes both ways until either side closes or the proxy
// is cut.
func (p *proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
	c.Close()
	up.Close()
}

// track registers a connection pair, or closes it when the proxy was cut
// meanwhile.
func (p *proxy) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		c.Close()
		up.Close()
		return false
	}
	p.conns[c], p.conns[up] = true, true
	return true
}
