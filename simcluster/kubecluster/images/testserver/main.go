// Command testserver is the local cloud's test workload: one static binary
// that serves HTTP (its pod's name and address, and probe endpoints) or,
// as "testserver get URL...", fetches URLs and exits 0 only if every one
// answered 200, so a pod's phase (Succeeded or Failed) is the result of a
// connectivity check without kubectl exec.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2:]))
	}
	addr := ":8080"
	if v := os.Getenv("LISTEN"); v != "" {
		addr = v
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
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
