package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/internal/atomicfile"
)

// handBack writes the Amazon VPC CNI's checkpoint from vpcnet's, once the
// agent has stopped (its checkpoint store with it): aws-node restores its
// assignments only from its own file, so a node switched back to it
// would otherwise hand the addresses of pods vpcnet wired to new pods,
// and keep those of pods deleted since as held. The file on disk is what
// is written, not the agent's memory: it is what every answered ADD is
// in. A node that was never aws-node's gets the file too; aws-node reads
// nothing else, and vpcnet reads it only when it has no checkpoint of its
// own. Not written when vpcnet has no checkpoint (nothing to hand back)
// or cannot read it (the corrupt file is kept aside by disk.Load).
func (a *Agent) handBack() {
	path := a.cfg.AWSCNICheckpoint
	if path == "" {
		return
	}
	st, err := a.disk.Load(a.cfg.CheckpointPath())
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		a.log.Error("not writing the Amazon VPC CNI's checkpoint: vpcnet's cannot be read", "err", err)
		return
	}
	data, err := checkpoint.EncodeAWS(st)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = atomicfile.Write(path, data, 0o644)
	}
	if err != nil {
		a.log.Error("could not write the Amazon VPC CNI's checkpoint: switching this node back to aws-node would lose its pods' assignments", "path", path, "err", err)
		return
	}
	a.log.Info("wrote the Amazon VPC CNI's checkpoint: aws-node can take this node back with its pods", "path", path, "assignments", len(st.Entries))
}
