// Command testserver is the local cloud's test workload: one static binary
// that serves HTTP (its pod's name and address, and probe endpoints) or,
// as "testserver get URL...", fetches URLs and exits 0 only if every one
// answered 200, so a pod's phase (Succeeded or Failed) is the result of a
// connectivity check without kubectl exec; "testserver stream URL SECONDS"
// holds one connection to /stream open and reports its longest silence.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "hammer" {
		os.Exit(hammer(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "stream" {
		os.Exit(stream(os.Args[2:]))
	}
	addr := ":8080"
	if v := os.Getenv("LISTEN"); v != "" {
		addr = v
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	// /stream writes a numbered line every 100 ms for as long as the
	// client stays: one TCP connection whose every gap the client sees.
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		flusher, _ := w.(http.Flusher)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "%d\n", i); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		local := ""
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			local = a.String()
		}
		fmt.Fprintf(w, "%s %s from %s\n", host, local, r.RemoteAddr)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// SIGTERM, as the kubelet stops a pod: finish what is in flight and
	// exit 0, so a deleted pod ends Completed rather than Error.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	fmt.Fprintf(os.Stderr, "testserver %s listening on %s\n", host, addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// get fetches each URL, retrying for up to 30 seconds (a Service's rules
// may lag the pod's start), and prints what each answered.
func get(urls []string) int {
	client := &http.Client{Timeout: 3 * time.Second}
	failed := 0
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var last error
		for ctx.Err() == nil {
			resp, err := client.Get(u)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					fmt.Printf("GET %s: %s\n", u, strings.TrimSpace(string(body)))
					last = nil
					break
				}
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			last = err
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		cancel()
		if last != nil {
			fmt.Printf("GET %s failed: %v\n", u, last)
			failed++
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// hammer is "hammer CIDR PORT SECONDS": for SECONDS it asks every address
// of CIDR for http://ADDR:PORT/ over and over, each attempt with a short
// timeout, so that a pod created meanwhile is asked from the moment it has
// an address. It prints "OK ADDR NAME" for the first answer from each
// address (NAME: the answering pod), and "LOST ADDR NAME" for every later
// attempt to an address that had answered and then did not: what a
// NetworkPolicy test reads to tell "never connected" and "always
// connected once up" apart. Exit 0 unless the arguments are wrong.
func hammer(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: testserver hammer CIDR PORT SECONDS")
		return 2
	}
	prefix, err := netip.ParsePrefix(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var seconds int
	if _, err := fmt.Sscan(args[2], &seconds); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	port := args[1]
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	// 254 addresses asked at once need more descriptors than a
	// container's default soft limit leaves.
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	// An address nobody serves is given up on quickly; one that has
	// answered gets 3 s, longer than a SYN's first retransmission: a
	// loss then is a connection that was dropped, not a slow machine.
	quick := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	patient := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	slots := make(chan struct{}, 64)
	var mu sync.Mutex
	seen := map[netip.Addr]string{}
	var wg sync.WaitGroup
	for a := prefix.Masked().Addr().Next(); prefix.Contains(a); a = a.Next() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				had, ok := seen[a]
				mu.Unlock()
				client := quick
				if ok {
					client = patient
				}
				slots <- struct{}{}
				name := ""
				resp, err := client.Get("http://" + net.JoinHostPort(a.String(), port) + "/")
				<-slots
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					name, _, _ = strings.Cut(strings.TrimSpace(string(body)), " ")
				}
				mu.Lock()
				switch {
				case name != "" && !ok:
					seen[a] = name
					fmt.Printf("OK %s %s %s\n", a, name, time.Now().UTC().Format(time.RFC3339Nano))
				case name == "" && ok:
					fmt.Printf("LOST %s %s %s: %v\n", a, had, time.Now().UTC().Format(time.RFC3339Nano), err)
				}
				mu.Unlock()
				if err != nil {
					// A refused connection answers at once: do not spin.
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Println("DONE")
	return 0
}

// stream is "stream URL SECONDS": one GET of URL (a testserver's
// /stream), read for SECONDS. It prints "CONNECTED" once the first line
// arrives, then "MAXGAP D" (the longest wait between two lines) at the
// end, and exits 0 only if the one connection stayed up the whole time
// with every line in order: what a switch-over test reads to tell an
// established connection that kept flowing from one that broke.
func stream(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: testserver stream URL SECONDS")
		return 2
	}
	var seconds int
	if _, err := fmt.Sscan(args[1], &seconds); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		fmt.Printf("FAILED connect: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	var maxGap time.Duration
	last := time.Now()
	next := 0
	buf := make([]byte, 0, 64)
	one := make([]byte, 1)
	for {
		_, err := resp.Body.Read(one)
		if err != nil {
			if ctx.Err() != nil {
				break // the time is up: the connection held
			}
			fmt.Printf("MAXGAP %s\nFAILED after line %d: %v\n", maxGap, next, err)
			return 1
		}
		if one[0] != '\n' {
			buf = append(buf, one[0])
			continue
		}
		var n int
		if _, err := fmt.Sscan(string(buf), &n); err != nil || n != next {
			fmt.Printf("FAILED line %q, want %d\n", buf, next)
			return 1
		}
		buf = buf[:0]
		now := time.Now()
		if next == 0 {
			fmt.Println("CONNECTED")
		} else if gap := now.Sub(last); gap > maxGap {
			maxGap = gap
		}
		last = now
		next++
	}
	// A connection whose packets are dropped does not fail; it goes
	// quiet until the time is up. That silence counts too.
	if tail := time.Since(last); tail > maxGap {
		maxGap = tail
	}
	fmt.Printf("MAXGAP %s\nLINES %d\n", maxGap, next)
	if next == 0 || maxGap > 5*time.Second {
		fmt.Println("FAILED: the connection went quiet")
		return 1
	}
	return 0
}
