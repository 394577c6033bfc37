package main

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// footprintPods is how many pods the footprint scenario runs: EKS's
// recommended max pods with prefix delegation.
const footprintPods = 250

// footprint is scenario 5: vpcnetd's memory and CPU with no pods and with
// 250, and how fast it is ready again after a restart with their
// checkpoint.
func (b *bench) footprint(ctx context.Context, res *Result) error {
	nd, err := b.startNode(ctx, clusterSpec{
		name: "footprint", instanceType: "m5.16xlarge", attachDelay: time.Second, imdsLag: 200 * time.Millisecond,
		env: []string{"ENABLE_PREFIX_DELEGATION=true"},
	})
	if err != nil {
		return err
	}
	defer nd.close()
	if err := nd.n.WaitReady(ctx); err != nil {
		return err
	}
	if _, err := nd.settle(ctx, 3*time.Second, time.Minute); err != nil {
		return err
	}
	const window = 10 * time.Second
	idle0, err := sampleAgent(ctx, nd, window)
	if err != nil {
		return err
	}

	list, err := agentConfList(nd.n.ConfDir(), "")
	if err != nil {
		return err
	}
	net := newNetwork("vpcnet", nd.n.NetNS, []string{b.opts.bin}, nd.dir+"/cni-cache", list)
	cpuBefore, err := cpuTime(nd.n.AgentPID())
	if err != nil {
		return err
	}
	mBefore, err := scrape(ctx, nd.n.NetNS)
	if err != nil {
		return err
	}
	prof, err := b.startProfile("footprint-add")
	if err != nil {
		return err
	}
	if err := addPods(ctx, net, nd.prefix, footprintPods, 4); err != nil {
		return err
	}
	if err := prof.stop(ctx); err != nil {
		return err
	}
	cpuAfter, err := cpuTime(nd.n.AgentPID())
	if err != nil {
		return err
	}
	mAfter, err := scrape(ctx, nd.n.NetNS)
	if err != nil {
		return err
	}
	passes := mAfter.Diff(mBefore).Sum("vpcnet_reconcile_passes_total")
	if _, err := nd.settle(ctx, 3*time.Second, time.Minute); err != nil {
		return err
	}
	idle250, err := sampleAgent(ctx, nd, window)
	if err != nil {
		return err
	}

	// Restart with the checkpoint of 250 pods, as after an upgrade.
	var readies, reported []float64
	var restarted usage
	for range 3 {
		if err := nd.n.StopAgent(10 * time.Second); err != nil {
			return err
		}
		took, err := timeToReady(ctx, nd)
		if err != nil {
			return err
		}
		readies = append(readies, took.Seconds())
		m, err := scrape(ctx, nd.n.NetNS)
		if err != nil {
			return err
		}
		reported = append(reported, m.Sum("vpcnet_startup_duration_seconds"))
		if restarted, err = readUsage(nd.n.AgentPID()); err != nil {
			return err
		}
	}

	t := Table{
		Title:  "Agent footprint: vpcnetd on an m5.16xlarge with ENABLE_PREFIX_DELEGATION=true",
		Header: []string{"figure", "0 pods", fmt.Sprintf("%d pods", footprintPods)},
	}
	t.AddRow("resident memory (VmRSS)", fmtMiB(idle0.rss), fmtMiB(idle250.rss))
	t.AddRow("  anonymous (RssAnon): heap, stacks, runtime", fmtMiB(idle0.anon), fmtMiB(idle250.anon))
	t.AddRow("  file-backed (RssFile): the executable's pages", fmtMiB(idle0.file), fmtMiB(idle250.file))
	t.AddRow("  private dirty (smaps_rollup Private_Dirty): written pages, this process's alone", fmtMiB(idle0.privDirty), fmtMiB(idle250.privDirty))
	t.AddRow("  private clean (Private_Clean): unwritten pages only it maps, most of them the executable's", fmtMiB(idle0.privClean), fmtMiB(idle250.privClean))
	t.AddRow("  shared (Shared_Clean + Shared_Dirty): pages other processes map too", fmtMiB(idle0.shared), fmtMiB(idle250.shared))
	t.AddRow("  proportional set size (Pss)", fmtMiB(idle0.pss), fmtMiB(idle250.pss))
	t.AddRow("peak resident memory (VmHWM)", fmtMiB(idle0.hwm), fmtMiB(idle250.hwm))
	t.AddRow("Go heap in use (go_memstats_heap_inuse_bytes)", fmtMiB(idle0.heap), fmtMiB(idle250.heap))
	t.AddRow("memory the Go runtime holds (go_memstats_sys_bytes)", fmtMiB(idle0.sys), fmtMiB(idle250.sys))
	t.AddRow(fmt.Sprintf("CPU while idle (%s window, %% of one core)", window), fmtPct(idle0.cpu), fmtPct(idle250.cpu))
	t.AddRow(fmt.Sprintf("agent CPU per ADD while %d pods were added", footprintPods), "",
		fmt.Sprintf("%.2f ms", (cpuAfter-cpuBefore).Seconds()*1000/footprintPods))
	t.AddRow(fmt.Sprintf("reconcile passes while %d pods were added", footprintPods), "", fmt.Sprint(passes))
	rd := Summarize(readies)
	t.AddRow("restart to ready, checkpoint of 250 pods (3 restarts: min / median / max)", "", fmtSpread(rd, fmtSec))
	t.AddRow("  the agent's own vpcnet_startup_duration_seconds", "", fmtSpread(Summarize(reported), fmtSec))
	t.AddRow("resident memory just after a restart", "", fmtMiB(restarted.rss))
	t.Notes = append(t.Notes,
		"memory and CPU from /proc/PID/status, /proc/PID/smaps_rollup and /proc/PID/stat; restart to ready is from the agent's fork to the first 200 on /readyz, polled every 5 ms",
		"the binary under test is vpcnetd as built for the local cloud; file-backed pages of its executable count in RSS")
	res.Tables = append(res.Tables, t, b.executables(res))
	res.figure("rss_0_mib", idle0.rss/(1<<20))
	res.figure("rss_250_mib", idle250.rss/(1<<20))
	res.figure("rss_file_250_mib", idle250.file/(1<<20))
	res.figure("private_dirty_250_mib", idle250.privDirty/(1<<20))
	res.figure("private_clean_250_mib", idle250.privClean/(1<<20))
	res.figure("shared_250_mib", idle250.shared/(1<<20))
	res.figure("ready_after_restart_s_median", rd.P50)
	res.goal("RSS ≤ 25 MiB at 250 pods", fmtMiB(idle250.rss), idle250.rss <= 25<<20)
	res.goal("ready ≤ 1 s after start with a warm checkpoint (250 pods)", fmt.Sprintf("%s worst of 3", fmtSec(rd.Max)), rd.Max <= 1)
	return nil
}

// executables is the size of each binary under test and of the
// reference plugins: the file, and what of it is mapped when it runs (its
// loadable sections: code, read-only data, the tables the runtime reads);
// debug information stays on disk.
func (b *bench) executables(res *Result) Table {
	t := Table{Title: "Executables", Header: []string{"binary", "file", "loaded sections"}}
	for _, e := range []struct{ name, path string }{
		{"vpcnetd", filepath.Join(b.opts.bin, "vpcnetd")},
		{"vpcnet (plugin)", filepath.Join(b.opts.bin, "vpcnet")},
		{"ptp (reference)", filepath.Join(b.opts.refBin, "ptp")},
		{"host-local (reference)", filepath.Join(b.opts.refBin, "host-local")},
	} {
		file, loaded, err := binarySize(e.path)
		if err != nil {
			t.AddRow(e.name, err.Error(), "")
			continue
		}
		t.AddRow(e.name, fmtMiB(file), fmtMiB(loaded))
		res.figure("binary_"+strings.Fields(e.name)[0]+"_mib", file/(1<<20))
	}
	t.Notes = append(t.Notes, "vpcnetd and vpcnet as make bench builds them (go build, not stripped); the reference plugins as Debian ships them")
	return t
}

// binarySize is an ELF file's size and the size of its sections that
// are loaded into memory.
func binarySize(path string) (file, loaded float64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	f, err := elf.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Type != elf.SHT_NOBITS {
			loaded += float64(s.Size)
		}
	}
	return float64(fi.Size()), loaded, nil
}

func fmtPct(v float64) string { return fmt.Sprintf("%.1f%%", v*100) }

// sampleAgent reads the agent's memory, and its CPU over window.
func sampleAgent(ctx context.Context, nd *node, window time.Duration) (usage, error) {
	pid := nd.n.AgentPID()
	c0, err := cpuTime(pid)
	if err != nil {
		return usage{}, err
	}
	select {
	case <-ctx.Done():
		return usage{}, ctx.Err()
	case <-time.After(window):
	}
	c1, err := cpuTime(pid)
	if err != nil {
		return usage{}, err
	}
	u, err := readUsage(pid)
	if err != nil {
		return usage{}, err
	}
	if err := readRollup(pid, &u); err != nil {
		return usage{}, err
	}
	u.cpu = (c1 - c0).Seconds() / window.Seconds()
	if m, err := scrape(ctx, nd.n.NetNS); err == nil {
		u.heap = m.Sum("go_memstats_heap_inuse_bytes")
		u.sys = m.Sum("go_memstats_sys_bytes")
	}
	return u, nil
}

// addPods adds n pods, par at a time, and keeps them.
func addPods(ctx context.Context, net *network, prefix string, n, par int) error {
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p, err := newPod(prefix, fmt.Sprintf("f-%d", i))
			if err == nil {
				_, err = net.add(ctx, p)
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}

// timeToReady starts the agent and polls /readyz until it says ready.
func timeToReady(ctx context.Context, nd *node) (time.Duration, error) {
	start := time.Now()
	if err := nd.n.StartAgent(); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := nd.n.Get(ctx, "/readyz"); err == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("vpcnetd not ready 30 s after a restart with %d pods: %w", footprintPods, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
