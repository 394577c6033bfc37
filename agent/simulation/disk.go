package simulation

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/netip"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/checkpoint/disk"
	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/ipam"
)

// nodeDisk is the node's disk as the agent sees it (agent.Disk): the
// checkpoint file's bytes in memory, which survive the agent's crashes.
// A write fails when the schedule says so; one that lands sometimes
// leaves the file it replaced behind as an older copy, which an operator
// can restore by mistake.
type nodeDisk struct {
	rng *rand.Rand
	// path is the checkpoint's; any other file does not exist.
	path string
	// bytes are the checkpoint file (nil: none); older are copies.
	bytes []byte
	older [][]byte
	// holds is what bytes hold, key to address, decoded when I7 first
	// asks after bytes changed (set); nil until then.
	holds map[ipam.Key]netip.Addr
	// failNext makes writes fail: the volume is full.
	failNext bool
	// unencodable is the last state the agent asked to write that does
	// not encode: never a disk's fault, always the agent's.
	unencodable error
	// conf says the CNI configuration was written.
	conf bool
	// MemFiles are the agent's other state files (the preflight
	// record), which survive its crashes.
	agent.MemFiles
}

var _ agent.Disk = (*nodeDisk)(nil)

func (d *nodeDisk) Load(path string) (checkpoint.State, error) {
	if path != d.path || d.bytes == nil {
		return checkpoint.State{}, fmt.Errorf("load checkpoint: %w", &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist})
	}
	st, err := checkpoint.Decode(d.bytes)
	if err != nil {
		return checkpoint.State{}, &disk.CorruptError{Path: path, Err: err, CopyErr: errors.New("simulated disk")}
	}
	return st, nil
}

func (d *nodeDisk) Save(path string, s checkpoint.State) error {
	if path != d.path {
		return fmt.Errorf("simulated: the agent wrote its checkpoint to %s, not %s", path, d.path)
	}
	if d.failNext {
		return errors.New("simulated: write checkpoint: no space left on device")
	}
	b, err := checkpoint.Encode(s)
	if err != nil {
		d.unencodable = err
		return err
	}
	if d.bytes != nil && d.rng.IntN(4) == 0 {
		d.older = append(d.older, d.bytes)
	}
	d.set(b)
	return nil
}

func (d *nodeDisk) InstallConf(string, string, cniconf.Options) error {
	d.conf = true
	return nil
}

// set replaces the checkpoint file by b (nil: deleted).
func (d *nodeDisk) set(b []byte) {
	d.bytes, d.holds = b, nil
}

// onDisk is what the checkpoint file says, key to address; a file that
// does not decode holds nothing.
func (d *nodeDisk) onDisk() map[ipam.Key]netip.Addr {
	if d.holds != nil {
		return d.holds
	}
	d.holds = map[ipam.Key]netip.Addr{}
	if d.bytes == nil {
		return d.holds
	}
	st, err := checkpoint.Decode(d.bytes)
	if err != nil {
		return d.holds
	}
	for _, e := range st.Entries {
		d.holds[e.Key] = e.Addr
	}
	return d.holds
}
