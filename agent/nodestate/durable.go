package nodestate

import (
	"fmt"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// persistRetry spaces out checkpoint writes after one failed, so a broken
// disk is not hammered; replies wait meanwhile.
const persistRetry = time.Second

// durability tracks the checkpoint versions: what the pool says now
// (version), what is on disk (written), what is being written (inFlight),
// and the replies and releases that wait for a version to be on disk.
type durability struct {
	// out is where replies go once their version is on disk: the Node's
	// output of the step under way.
	out      *Ready
	version  uint64
	written  uint64
	inFlight uint64
	retryAt  time.Time
	pending  []pendingReply
	// releasing are keys left out of the checkpoint but still held in the
	// pool until that is on disk: nobody else gets their address meanwhile.
	releasing map[ipam.Key]bool
}

// pendingReply is a reply released, or undone, once version is written.
type pendingReply struct {
	version uint64
	reply   Reply
	// done runs when the write of version ends; ok says it succeeded.
	// It may change the reply.
	done func(r *Reply, ok bool)
}

func (d *durability) changed() uint64 {
	d.version++
	return d.version
}

// after queues r until the current version is on disk; when it already
// is, r goes out now.
func (d *durability) after(r Reply, done func(r *Reply, ok bool)) {
	if d.version == d.written {
		if done != nil {
			done(&r, true)
		}
		if r.ID != 0 {
			d.out.Replies = append(d.out.Replies, r)
		}
		return
	}
	d.pending = append(d.pending, pendingReply{version: d.version, reply: r, done: done})
}

// assigned queues an Add's reply r as after does and, while r waits for
// the disk, announces it in Ready.Assigned.
func (d *durability) assigned(r Reply, done func(r *Reply, ok bool)) {
	if d.version != d.written {
		d.out.Assigned = append(d.out.Assigned, r)
	}
	d.after(r, done)
}

// persist starts a write when the pool has changed and none is under way.
func (n *Node) persist(now time.Time) {
	d := &n.dur
	if d.inFlight != 0 || d.version == d.written || now.Before(d.retryAt) {
		return
	}
	d.inFlight = d.version
	n.out.Persist = &Persist{Version: d.version, State: n.state(now)}
}

func (n *Node) onPersisted(ev Persisted, now time.Time) {
	d := &n.dur
	if ev.Version != d.inFlight {
		panic(fmt.Sprintf("nodestate: Persisted %d while %d is being written", ev.Version, d.inFlight))
	}
	d.inFlight = 0
	ok := ev.Err == nil
	if ok {
		d.written = ev.Version
		d.retryAt = time.Time{}
	} else {
		d.retryAt = now.Add(persistRetry)
		n.log.Error("checkpoint write failed; replies that depend on it fail and nothing it recorded is visible", "err", ev.Err)
	}
	var keep []pendingReply
	for _, p := range d.pending {
		if p.version > ev.Version {
			keep = append(keep, p)
			continue
		}
		r := p.reply
		if p.done != nil {
			p.done(&r, ok)
		}
		if !ok && r.Err == nil {
			r.Err = fmt.Errorf("checkpoint: %w", ev.Err)
		}
		if r.ID != 0 { // internal releases have nobody to answer
			n.out.Replies = append(n.out.Replies, r)
		}
	}
	d.pending = keep
}

// replying says whether a reply about key waits for the disk: an Add
// being answered must not see its address taken back meanwhile.
func (n *Node) replying(key ipam.Key) bool {
	for _, p := range n.dur.pending {
		if p.reply.ID != 0 && p.reply.Assignment.Key == key {
			return true
		}
	}
	return false
}
