package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/vpcnet/vpcnet/dataplane"
)

// prewire makes the pod's veth while the agent chooses its address. In a
// cold burst the Add RPC waits seconds for an ENI and then answers dozens
// of pods at once; whatever wiring needs no address is done by then
// instead of queueing with every other pod's for the node's cores.
type prewire struct {
	cancel context.CancelFunc
	done   chan struct{}
	// pod, err and took are written before done is closed and read only
	// after.
	pod  *dataplane.PrewiredPod
	err  error
	took time.Duration
}

// startPrewire starts dataplane.PrewirePod on its own goroutine, which
// opens its own netlink handles; timeout bounds it (kernelTimeout: the
// agent's timeout is for the agent).
func startPrewire(dp *dataplane.Dataplane, cfg dataplane.PodConfig, timeout time.Duration) *prewire {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	p := &prewire{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		start := time.Now()
		p.pod, p.err = dp.PrewirePod(ctx, cfg)
		p.took = time.Since(start)
	}()
	return p
}

// wait returns the prewired veth once the goroutine is done. It takes no
// context: whatever the goroutine made must be known to be undone, and its
// own deadline bounds the wait.
func (p *prewire) wait() (*dataplane.PrewiredPod, error) {
	<-p.done
	return p.pod, p.err
}

// finish wires the pod on the prewired veth once its address is known.
func (p *prewire) finish(ctx context.Context, dp *dataplane.Dataplane, cfg dataplane.PodConfig) (dataplane.PodLinks, error) {
	pod, err := p.wait()
	if err != nil {
		return dataplane.PodLinks{}, err
	}
	return dp.WirePod(ctx, pod, cfg)
}

// abandon stops the prewiring and removes the veth it made, for an ADD
// that will not wire the pod. It does nothing once finish has had the
// veth: WirePod removes it on its own errors.
func (p *prewire) abandon(log *slog.Logger, containerID string) {
	p.cancel()
	pod, err := p.wait()
	if err != nil {
		return // PrewirePod left nothing behind
	}
	if err := pod.Remove(); err != nil {
		log.Error("rollback: remove the pod's veth", "container", containerID, "err", err)
	}
}
