package agent

import (
	"context"
	"os"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/checkpoint/disk"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/internal/atomicfile"
)

// Effects is how the owner's work runs: when, and on what. The owner
// never waits on disk or network itself; it hands each job on the
// executor, each checkpoint write and the CNI configuration's write to
// Go, and start-up waits between its tries with Sleep. vpcnetd runs each
// piece of work on a goroutine of its own and sleeps on its clock
// (Options.Effects nil). A simulation that runs the agent on one thread
// holds each piece until its schedule says it runs, can crash the agent
// with any of them run, half run or not run, and moves its clock instead
// of sleeping: that is how a single-threaded simulator drives code that
// is concurrent in production.
type Effects interface {
	// Go runs w, now or later, and must not wait for it.
	Go(ctx context.Context, w Work)
	// Sleep waits d, or until ctx ends; it reports whether d passed.
	Sleep(ctx context.Context, d time.Duration) bool
}

// Work is one piece of the owner's work. Job or Write says what it is,
// for a driver that schedules them apart; neither is set for the CNI
// configuration's write.
type Work struct {
	Job *nodestate.Job
	// Calls are the EC2 actions the job will call, for the cluster's
	// budget to grant before Run (executor.Calls): Run asks for them
	// itself; a driver that grants them its own way (the scale driver)
	// reads them here.
	Calls []string
	Write *nodestate.Persist
	// Run does the work and tells the owner how it went (tell reports
	// whether the owner heard: not once it has stopped). It returns
	// without telling when the agent stops first.
	Run func(ctx context.Context, tell func(nodestate.Event) bool)
}

// goroutines are vpcnetd's Effects: each piece of work on a goroutine of
// its own, telling the owner through its event channel (send).
type goroutines struct {
	clk  clock.Clock
	send func(context.Context, nodestate.Event) bool
}

func (g goroutines) Go(ctx context.Context, w Work) {
	go w.Run(ctx, func(ev nodestate.Event) bool { return g.send(ctx, ev) })
}

func (g goroutines) Sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(g.clk, d, ctx.Done())
}

// Disk holds the files the agent's state lives in: the checkpoint, read
// at start and replaced by the store, the record of a passed IAM
// preflight (preflight_record.go), and the CNI configuration, written
// once the agent can serve. vpcnetd's is the node's file system
// (Options.Disk nil); a simulation keeps the bytes in memory and decides
// which writes land.
type Disk interface {
	// Load reads the checkpoint at path as disk.Load does: a missing
	// file matches fs.ErrNotExist, one that cannot be trusted is a
	// *disk.CorruptError.
	Load(path string) (checkpoint.State, error)
	// Save replaces the checkpoint at path durably: when it returns nil,
	// a crash cannot lose s.
	Save(path string, s checkpoint.State) error
	// InstallConf writes the CNI configuration as cniconf.Install does.
	InstallConf(dir, name string, opts cniconf.Options) error
	// ReadFile reads one of the agent's small state files; a missing
	// one matches fs.ErrNotExist.
	ReadFile(path string) ([]byte, error)
	// WriteFile replaces it durably, as Save does the checkpoint.
	WriteFile(path string, data []byte) error
}

// files is the node's file system.
type files struct{}

func (files) Load(path string) (checkpoint.State, error) { return disk.Load(path) }
func (files) Save(path string, s checkpoint.State) error { return disk.Save(path, s) }
func (files) InstallConf(dir, name string, o cniconf.Options) error {
	return cniconf.Install(dir, name, o)
}
func (files) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
func (files) WriteFile(path string, data []byte) error {
	return atomicfile.Write(path, data, 0o600)
}
