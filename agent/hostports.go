package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/hostport"
	"github.com/vpcnet/vpcnet/internal/atomicfile"
	"github.com/vpcnet/vpcnet/ipam"
)

// HostPorts writes the node's hostPort rules.
type HostPorts interface {
	// SetHostPorts makes the rules exactly entries, in one transaction.
	SetHostPorts(ctx context.Context, entries []hostport.Entry) error
	// ForgetUDPFlows drops conntrack's UDP flows to newly mapped ports,
	// which would otherwise keep bypassing the new rules.
	ForgetUDPFlows(ctx context.Context, ports []uint16) error
}

// hostPortSweep is how often the hostPorts of addresses the pool no
// longer holds (a DEL that never came, a GC, a restart's reclaim) are
// removed.
const hostPortSweep = time.Minute

// hostPortKeeper owns the node's hostPorts: the set, its file beside the
// checkpoint and the rules. One goroutine (run) makes every change, so
// the file and the rules are written in the order the changes came and
// no lock is held while they are.
type hostPortKeeper struct {
	path string
	w    HostPorts // nil: this agent cannot map hostPorts
	log  *slog.Logger
	clk  clock.Clock
	reqs chan hostPortReq

	set hostport.Set // owned by run once it starts

	mu sync.Mutex // guards keys; never held across I/O
	// keys are the attachments with hostPorts, so that an Add or Del
	// without any need not wait for run.
	keys map[ipam.Key]bool
}

type hostPortReq struct {
	// put records an entry (no mappings: drops its key); keep drops
	// every entry it returns false for; with neither, drop forgets one
	// key. rewrite writes the rules even when the set is unchanged.
	put     *hostport.Entry
	keep    func([]hostport.Entry) map[ipam.Key]bool
	drop    ipam.Key
	rewrite bool
	done    chan error
}

func newHostPortKeeper(path string, w HostPorts, log *slog.Logger, clk clock.Clock) *hostPortKeeper {
	return &hostPortKeeper{path: path, w: w, log: log, clk: clk, reqs: make(chan hostPortReq), keys: map[ipam.Key]bool{}}
}

// load reads the file the last run left. A file that cannot be read is
// set aside, named in the log: the rules it described stay in the kernel
// until the next change, and their pods' hostPorts come back when the
// runtime adds them again.
func (k *hostPortKeeper) load() {
	data, err := os.ReadFile(k.path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		k.set, err = hostport.Decode(data)
	}
	if err != nil {
		aside := k.path + ".unreadable"
		rerr := os.Rename(k.path, aside)
		k.log.Error("hostPort file unreadable: starting without the hostPorts it held; pods recreated get theirs again",
			"path", k.path, "setAside", aside, "err", errors.Join(err, rerr))
		k.set = hostport.Set{}
	}
	k.publishKeys()
}

func (k *hostPortKeeper) publishKeys() {
	keys := make(map[ipam.Key]bool, k.set.Len())
	for _, e := range k.set.Entries() {
		keys[e.Key] = true
	}
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
}

func (k *hostPortKeeper) holds(key ipam.Key) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[key]
}

// run makes the changes asked of it, and every hostPortSweep removes the
// entries sweep says are gone, until ctx ends.
func (k *hostPortKeeper) run(ctx context.Context, sweep func([]hostport.Entry) map[ipam.Key]bool) {
	tick := make(chan struct{}, 1)
	arm := func() {
		k.clk.AfterFunc(hostPortSweep, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
	}
	arm()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-k.reqs:
			r.done <- k.apply(ctx, r)
		case <-tick:
			if err := k.apply(ctx, hostPortReq{keep: sweep}); err != nil {
				k.log.Error("hostPort sweep failed; retried at the next", "err", err)
			}
			arm()
		}
	}
}

// apply makes one change: in the set, then on disk, then in the kernel.
// A change that cannot be written is undone, so the set is always what
// the file and the rules say.
func (k *hostPortKeeper) apply(ctx context.Context, r hostPortReq) error {
	before, next := k.set, k.set.Clone()
	switch {
	case r.put != nil:
		if err := next.Put(*r.put); err != nil {
			return err
		}
	case r.keep != nil:
		live := r.keep(before.Entries())
		for _, e := range before.Entries() {
			if !live[e.Key] {
				next.Drop(e.Key)
				k.log.Info("hostPorts removed: the pool no longer holds their address", "key", e.Key.String(), "pod", e.Pod.String(), "addr", e.Addr)
			}
		}
	default:
		next.Drop(r.drop)
	}
	if before.Equal(next) && !r.rewrite {
		return nil
	}
	if k.w == nil {
		if next.Len() == 0 {
			return nil
		}
		return errors.New("this vpcnetd cannot map hostPorts (no hostPort writer)")
	}
	if err := k.write(ctx, next); err != nil {
		if rerr := k.write(ctx, before); rerr != nil {
			k.log.Error("hostPorts: could not restore the previous rules after a failed change", "err", rerr)
		}
		return err
	}
	k.set = next
	k.publishKeys()
	if ports := newUDPPorts(before, next); len(ports) > 0 {
		// As portmap: a failure here is worth a line, not the pod.
		if err := k.w.ForgetUDPFlows(ctx, ports); err != nil {
			k.log.Warn("hostPorts: stale UDP flows kept; their clients may not reach the new pod until they time out", "ports", ports, "err", err)
		}
	}
	return nil
}

// newUDPPorts are the UDP host ports next maps that before did not.
func newUDPPorts(before, next hostport.Set) []uint16 {
	had := map[hostport.Mapping]bool{}
	for _, e := range before.Entries() {
		for _, m := range e.Mappings {
			had[m] = true
		}
	}
	var out []uint16
	for _, e := range next.Entries() {
		for _, m := range e.Mappings {
			if m.Protocol == hostport.UDP && !had[m] && !slices.Contains(out, m.HostPort) {
				out = append(out, m.HostPort)
			}
		}
	}
	return out
}

func (k *hostPortKeeper) write(ctx context.Context, s hostport.Set) error {
	data, err := s.Encode()
	if err != nil {
		return fmt.Errorf("encode hostPorts: %w", err)
	}
	if err := atomicfile.Write(k.path, data, 0o600); err != nil {
		return fmt.Errorf("write hostPort file %s: %w", k.path, err)
	}
	if err := k.w.SetHostPorts(ctx, s.Entries()); err != nil {
		return fmt.Errorf("write hostPort rules: %w", err)
	}
	return nil
}

// do hands r to run and waits for its answer.
func (k *hostPortKeeper) do(ctx context.Context, r hostPortReq) error {
	r.done = make(chan error, 1)
	return ask(ctx, k.reqs, r, r.done)
}

// ask hands r to the goroutine that owns reqs and waits for its answer
// on done, or for ctx.
func ask[R any](ctx context.Context, reqs chan<- R, r R, done <-chan error) error {
	select {
	case reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// put records the attachment's hostPorts, to the address it holds.
func (k *hostPortKeeper) put(ctx context.Context, as ipam.Assignment, ms []hostport.Mapping) error {
	if len(ms) == 0 && !k.holds(as.Key) {
		return nil
	}
	e := hostport.Entry{Key: as.Key, Pod: as.Pod, Addr: as.Addr, Mappings: ms}
	return k.do(ctx, hostPortReq{put: &e})
}

// drop removes the attachment's hostPorts, if it has any.
func (k *hostPortKeeper) drop(ctx context.Context, key ipam.Key) error {
	if !k.holds(key) {
		return nil
	}
	return k.do(ctx, hostPortReq{drop: key})
}

// sweep removes the hostPorts whose attachment no longer holds their
// address in the pool; rewrite writes the rules even if none goes, as at
// start-up, when the kernel may have lost them.
func (k *hostPortKeeper) sweep(ctx context.Context, keep func([]hostport.Entry) map[ipam.Key]bool, rewrite bool) error {
	return k.do(ctx, hostPortReq{keep: keep, rewrite: rewrite})
}

// liveHostPorts says which entries' attachments still hold their address,
// asking the owner goroutine.
func liveHostPorts(ctx context.Context, a *Agent) func([]hostport.Entry) map[ipam.Key]bool {
	return func(entries []hostport.Entry) map[ipam.Key]bool {
		live := map[ipam.Key]bool{}
		err := a.query(ctx, func(n *nodestate.Node) {
			for _, e := range entries {
				as, _, ok := n.Lookup(e.Key)
				live[e.Key] = ok && as.Addr == e.Addr
			}
		})
		if err != nil {
			// Not known now: keep everything until the next sweep.
			for _, e := range entries {
				live[e.Key] = true
			}
		}
		return live
	}
}

// mappingsOf turns the plugin's checked mappings back into hostport's.
func mappingsOf(in []agentapi.PortMapping, ipv6 bool) ([]hostport.Mapping, error) {
	var out []hostport.Mapping // nil for the many Adds without hostPorts
	for i, p := range in {
		m, skip, err := hostport.Parse(int(p.HostPort), int(p.ContainerPort), p.Protocol, p.HostIp, ipv6)
		if err != nil {
			return nil, fmt.Errorf("port mapping %d: %w", i, err)
		}
		if !skip {
			out = append(out, m)
		}
	}
	return out, nil
}
