package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/clock"
)

// Run starts the agent in the order DESIGN.md requires and serves until
// ctx ends. The CNI configuration is written only once the agent can
// serve, and is left in place on shutdown so an upgrade does not make the
// node's network unready.
func (a *Agent) Run(ctx context.Context) error {
	start := a.now()
	var wg sync.WaitGroup
	served := false
	// Last, once every goroutine (the checkpoint store among them) is done.
	defer func() {
		if served {
			a.handBack()
		}
	}()
	defer a.confWG.Wait()
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if err := a.serveHTTP(ctx, &wg); err != nil {
		return err
	}
	if err := a.learn(ctx); err != nil {
		return err
	}
	a.startKube(ctx, &wg)
	a.runPreflight(ctx, &wg)
	if err := a.boot(ctx); err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.own(ctx)
	}()
	if err := a.startStep("restore hostPorts", func() error { return a.startHostPorts(ctx, &wg) }); err != nil {
		a.ready.set(CondHost, false, err.Error())
		return err
	}
	a.policy.run(ctx, &wg, heldPods(a), a.kube.ScheduledPods)
	a.bridgeKube(ctx, &wg)
	if a.budget != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.watchPressure(ctx)
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.watchHolds(ctx)
		}()
	}

	var srv *agentapi.Server
	if err := a.startStep("serve the plugin socket", func() error {
		l, err := listenSocket(ctx, a.cfg.Socket)
		if err != nil {
			return err
		}
		srv = agentapi.NewServer(&rpcServer{a: a})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, agentapi.ErrServerStopped) {
				a.log.Error("plugin socket stopped", "err", err)
			}
		}()
		return nil
	}); err != nil {
		return err
	}
	a.ready.set(CondSocket, true, "serving "+a.cfg.Socket)
	a.send(ctx, nodestate.Tick{}) // publish readiness with the socket up
	a.met.startup.Set(a.now().Sub(start).Seconds())

	served = true
	<-ctx.Done()
	a.ready.set(CondSocket, false, "shutting down")
	a.stopServer(srv)
	a.log.Info("stopped; the CNI configuration stays so the node keeps its network ready during an upgrade")
	return nil
}

// stopServer lets in-flight calls finish, for at most a few seconds.
func (a *Agent) stopServer(srv *agentapi.Server) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	if !clock.Sleep(a.clk, gracefulStop, done) {
		return
	}
	srv.Stop()
}

// listen opens a TCP listener for the HTTP endpoints.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return l, nil
}

// startHostPorts reads the hostPorts the last run kept, drops those whose
// pod the restart found gone, writes the rest's rules (the kernel may have
// lost them) and starts their owner.
func (a *Agent) startHostPorts(ctx context.Context, wg *sync.WaitGroup) error {
	a.ports.load()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.ports.run(ctx, liveHostPorts(ctx, a))
	}()
	if err := a.ports.sweep(ctx, liveHostPorts(ctx, a), true); err != nil {
		return fmt.Errorf("restore hostPort rules: %w", err)
	}
	return nil
}
