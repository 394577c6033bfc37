// Command pause is the pod sandbox's process: it holds the pod's
// namespaces and does nothing else until it is told to stop. It is the
// local cloud's stand-in for registry.k8s.io/pause, built from source
// because the nodes have no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	// As PID 1 of the pod it also reaps orphans: SIGCHLD is handled by
	// the runtime's default (ignored children are reaped by the kernel).
	signal.Ignore(syscall.SIGCHLD)
	<-sig
}
