package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/cniconf"
)

// Run starts the agent in the order DESIGN.md requires and serves until
// ctx ends. The CNI configuration is written only once the agent can
// serve, and is left in place on shutdown so an upgrade does not make the
// node's network unready.
func (a *Agent) Run(ctx context.Context) error {
	start := a.now()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if err := a.serveHTTP(ctx, &wg); err != nil {
		return err
	}
	if err := a.step("learn the node", func() error { return a.learnNode(ctx) }); err != nil {
		return err
	}
	a.startKube(ctx, &wg)
	var missing bool
	if err := a.step("load the checkpoint", func() error {
		st, m, err := a.loadCheckpoint()
		if err != nil {
			return err
		}
		missing = m
		a.mu.Lock()
		a.ckAddrs = make(map[netip.Addr]bool, len(st.Entries))
		for _, e := range st.Entries {
			a.ckAddrs[e.Addr] = true
		}
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			a.ckAddrs = nil
			a.mu.Unlock()
		}()
		if err := a.retry(ctx, "read attached ENIs from EC2", CondCloud, func() error { return a.syncFromEC2(ctx) }); err != nil {
			return err
		}
		a.noteEC2(nil)
		return a.restore(st, missing)
	}); err != nil {
		a.ready.set(CondCheckpoint, false, err.Error())
		return err
	}
	a.ready.set(CondCheckpoint, true, "checkpoint loaded and reconciled with EC2")
	if err := a.step("cross-check the host", func() error {
		if err := a.checkHost(ctx); err != nil {
			return err
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if missing && len(a.quarantined) > 0 {
			a.log.Warn("checkpoint missing while the host routes live pods: not a new node; nothing is released until every such route is gone",
				"routed", len(a.quarantined))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := a.step("set up host networking", func() error {
		a.mu.Lock()
		node := a.node
		a.mu.Unlock()
		return a.host.Setup(ctx, node)
	}); err != nil {
		a.ready.set(CondHost, false, err.Error())
		return err
	}
	a.ready.set(CondHost, true, "host networking set up")

	var srv *grpc.Server
	if err := a.step("serve the plugin socket", func() error {
		l, err := listenSocket(ctx, a.cfg.Socket)
		if err != nil {
			return err
		}
		srv = grpc.NewServer()
		agentapi.RegisterAgentServer(srv, &rpcServer{a: a})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				a.log.Error("plugin socket stopped", "err", err)
			}
		}()
		return nil
	}); err != nil {
		return err
	}
	a.ready.set(CondSocket, true, "serving "+a.cfg.Socket)

	a.reconcile(ctx, false)
	a.met.startup.Set(a.now().Sub(start).Seconds())
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.reconcileLoop(ctx)
	}()

	<-ctx.Done()
	a.ready.set(CondSocket, false, "shutting down")
	a.stopGRPC(srv)
	a.log.Info("stopped; the CNI configuration stays so the node keeps its network ready during an upgrade")
	return nil
}

// stopGRPC lets in-flight calls finish, for at most a few seconds.
func (a *Agent) stopGRPC(srv *grpc.Server) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		srv.Stop()
	}
}

// updateReadiness re-evaluates the conditions that can change after
// start-up and installs the CNI configuration the first time all hold.
func (a *Agent) updateReadiness(ctx context.Context) {
	a.mu.Lock()
	st := a.pool.Stats(a.now())
	short, growErr, cloudOK, lastErr := a.lastShortfall, a.lastGrowErr, a.cloudOK, a.lastEC2Err
	a.mu.Unlock()
	if cloudOK {
		a.ready.set(CondCloud, true, "EC2 reachable; pool matches what EC2 says is attached")
	} else {
		a.ready.set(CondCloud, false, "EC2 unreachable: "+lastErr)
	}
	switch {
	case st.Free > 0:
		a.ready.set(CondAddresses, true, fmt.Sprintf("%d addresses free", st.Free))
	case st.Cooling > 0:
		a.ready.set(CondAddresses, true, fmt.Sprintf("no address free now; %d come out of cooldown from %s", st.Cooling, st.NextFree.Format(time.RFC3339)))
	case cloudOK && !short.Short() && growErr == nil:
		a.ready.set(CondAddresses, true, "no address free now; more obtainable from EC2")
	case short.Short():
		a.ready.set(CondAddresses, false, short.String())
	case growErr != nil:
		a.ready.set(CondAddresses, false, "no address free and growing the pool failed: "+growErr.Error())
	default:
		a.ready.set(CondAddresses, false, "no address free and EC2 unreachable")
	}
	ready, _ := a.ready.get()
	if ready && !a.confInstalled {
		opts := cniconf.Options{NetworkName: a.cfg.NetworkName, Socket: a.cfg.Socket, PortMap: true}
		if err := cniconf.Install(a.cfg.CNIConfDir, a.cfg.CNIConfName, opts); err != nil {
			a.log.Error("could not write the CNI configuration; kubelet keeps the node network unready", "err", err)
			a.kube.SetReady(false)
			return
		}
		a.confInstalled = true
		a.log.Info("ready: CNI configuration written", "path", a.cfg.CNIConfPath())
	}
	// Only now may the startup taint go: the node can network its pods.
	a.kube.SetReady(ready)
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
