package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// vpcnetd serves no pprof endpoint and the plugin lives for milliseconds,
// so --profile samples the whole machine with Linux perf (cpu-clock, frame
// pointer call graphs, which Go binaries keep) while a scenario's measured
// part runs, and converts the samples to pprof's format for
// `go tool pprof`. Each sample is labelled with its process name:
// `go tool pprof -tagfocus comm=vpcnetd FILE` shows the agent alone.

// profiler is a running `perf record`.
type profiler struct {
	cmd  *exec.Cmd
	data string
	out  string
}

// startProfile starts sampling every CPU for the profile name; with no
// --profile directory it does nothing.
func (b *bench) startProfile(name string) (*profiler, error) {
	if b.opts.profile == "" {
		return nil, nil
	}
	if err := os.MkdirAll(b.opts.profile, 0o755); err != nil {
		return nil, err
	}
	p := &profiler{data: filepath.Join(b.scratch, name+".perf.data"), out: filepath.Join(b.opts.profile, name+".pb.gz")}
	p.cmd = exec.Command("perf", "record", "-a", "-g", "-F", "499", "-q", "-o", p.data)
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("--profile needs Linux perf: %w", err)
	}
	// perf needs a moment to open its events on every CPU.
	time.Sleep(300 * time.Millisecond)
	return p, nil
}

// stop ends sampling and writes the pprof profile.
func (p *profiler) stop(ctx context.Context) error {
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	// perf writes its data on SIGINT and then dies of it.
	if err := p.cmd.Wait(); err != nil && !killedBy(err, syscall.SIGINT) {
		return fmt.Errorf("perf record: %w", err)
	}
	defer os.Remove(p.data)
	script := exec.CommandContext(ctx, "perf", "script", "-i", p.data, "-F", "comm,pid,period,ip,sym,dso")
	var out bytes.Buffer
	script.Stdout = &out
	if err := script.Run(); err != nil {
		return fmt.Errorf("perf script: %w", err)
	}
	samples, err := parsePerfScript(&out)
	if err != nil {
		return err
	}
	f, err := os.Create(p.out)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	_, err = zw.Write(encodeProfile(samples))
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		fmt.Fprintf(os.Stderr, "vpcnet-bench: CPU profile of every process written to %s (go tool pprof -tagfocus comm=vpcnetd %s)\n", p.out, p.out)
	}
	return err
}

// perfSample is one stack perf sampled, leaf first.
type perfSample struct {
	comm   string
	period int64 // nanoseconds of cpu-clock the sample stands for
	frames []frame
}

type frame struct{ fn, dso string }

// parsePerfScript reads `perf script -F comm,pid,period,ip,sym,dso`: a
// header line per sample, then one indented line per frame, then a blank
// line.
func parsePerfScript(r io.Reader) ([]perfSample, error) {
	var out []perfSample
	var cur *perfSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			cur = nil
		case line[0] != '\t' && line[0] != ' ':
			f := strings.Fields(line)
			if len(f) < 3 {
				return nil, fmt.Errorf("perf script: unexpected line %q", line)
			}
			period, err := strconv.ParseInt(f[len(f)-1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("perf script: period in %q: %w", line, err)
			}
			out = append(out, perfSample{comm: strings.Join(f[:len(f)-2], " "), period: period})
			cur = &out[len(out)-1]
		case cur != nil:
			// "\t<addr> <symbol> (<dso>)"; the symbol may hold spaces.
			s := strings.TrimSpace(line)
			_, rest, _ := strings.Cut(s, " ")
			fn, dso := rest, ""
			if i := strings.LastIndex(rest, " ("); i >= 0 && strings.HasSuffix(rest, ")") {
				fn, dso = rest[:i], rest[i+2:len(rest)-1]
			}
			cur.frames = append(cur.frames, frame{fn: fn, dso: filepath.Base(dso)})
		}
	}
	return out, sc.Err()
}

// encodeProfile writes samples as a pprof profile (profile.proto):
// sample types samples/count and cpu/nanoseconds, a location per
// function, a "comm" label per sample.
func encodeProfile(samples []perfSample) []byte {
	strs := map[string]uint64{"": 0}
	table := []string{""}
	str := func(s string) uint64 {
		if i, ok := strs[s]; ok {
			return i
		}
		strs[s] = uint64(len(table))
		table = append(table, s)
		return strs[s]
	}
	funcs := map[frame]uint64{}
	var buf, fnBuf, locBuf []byte
	valueType := func(typ, unit string) []byte {
		var v []byte
		v = protowire.AppendTag(v, 1, protowire.VarintType)
		v = protowire.AppendVarint(v, str(typ))
		v = protowire.AppendTag(v, 2, protowire.VarintType)
		return protowire.AppendVarint(v, str(unit))
	}
	buf = protowire.AppendTag(buf, 1, protowire.BytesType)
	buf = protowire.AppendBytes(buf, valueType("samples", "count"))
	buf = protowire.AppendTag(buf, 1, protowire.BytesType)
	buf = protowire.AppendBytes(buf, valueType("cpu", "nanoseconds"))
	for _, s := range samples {
		var locs []byte
		for _, fr := range s.frames {
			id, ok := funcs[fr]
			if !ok {
				id = uint64(len(funcs) + 1)
				funcs[fr] = id
				var fn []byte
				fn = protowire.AppendTag(fn, 1, protowire.VarintType)
				fn = protowire.AppendVarint(fn, id)
				fn = protowire.AppendTag(fn, 2, protowire.VarintType)
				fn = protowire.AppendVarint(fn, str(fr.fn))
				fn = protowire.AppendTag(fn, 3, protowire.VarintType)
				fn = protowire.AppendVarint(fn, str(fr.fn))
				fn = protowire.AppendTag(fn, 4, protowire.VarintType)
				fn = protowire.AppendVarint(fn, str(fr.dso))
				fnBuf = protowire.AppendTag(fnBuf, 5, protowire.BytesType)
				fnBuf = protowire.AppendBytes(fnBuf, fn)
				var line, loc []byte
				line = protowire.AppendTag(line, 1, protowire.VarintType)
				line = protowire.AppendVarint(line, id)
				loc = protowire.AppendTag(loc, 1, protowire.VarintType)
				loc = protowire.AppendVarint(loc, id)
				loc = protowire.AppendTag(loc, 4, protowire.BytesType)
				loc = protowire.AppendBytes(loc, line)
				locBuf = protowire.AppendTag(locBuf, 4, protowire.BytesType)
				locBuf = protowire.AppendBytes(locBuf, loc)
			}
			locs = protowire.AppendVarint(locs, id)
		}
		var sm, vals, label []byte
		sm = protowire.AppendTag(sm, 1, protowire.BytesType)
		sm = protowire.AppendBytes(sm, locs)
		vals = protowire.AppendVarint(vals, 1)
		vals = protowire.AppendVarint(vals, uint64(s.period))
		sm = protowire.AppendTag(sm, 2, protowire.BytesType)
		sm = protowire.AppendBytes(sm, vals)
		label = protowire.AppendTag(label, 1, protowire.VarintType)
		label = protowire.AppendVarint(label, str("comm"))
		label = protowire.AppendTag(label, 2, protowire.VarintType)
		label = protowire.AppendVarint(label, str(s.comm))
		sm = protowire.AppendTag(sm, 3, protowire.BytesType)
		sm = protowire.AppendBytes(sm, label)
		buf = protowire.AppendTag(buf, 2, protowire.BytesType)
		buf = protowire.AppendBytes(buf, sm)
	}
	buf = append(buf, locBuf...)
	buf = append(buf, fnBuf...)
	// period_type (11) and period (12): one cpu-clock tick. Its strings
	// are in the table already; the table is written last.
	pt := valueType("cpu", "nanoseconds")
	for _, s := range table {
		buf = protowire.AppendTag(buf, 6, protowire.BytesType)
		buf = protowire.AppendString(buf, s)
	}
	buf = protowire.AppendTag(buf, 11, protowire.BytesType)
	buf = protowire.AppendBytes(buf, pt)
	if len(samples) > 0 {
		buf = protowire.AppendTag(buf, 12, protowire.VarintType)
		buf = protowire.AppendVarint(buf, uint64(samples[0].period))
	}
	return buf
}

func killedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
