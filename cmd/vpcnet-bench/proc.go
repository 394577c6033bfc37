package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// usage is one reading of a process.
type usage struct {
	rss, hwm   float64 // bytes
	anon, file float64 // bytes: the parts of rss
	// From /proc/PID/smaps_rollup, bytes: pages only this process maps
	// (dirty: written, which only swap can take away; clean: the
	// executable's pages and others the kernel can drop and read again),
	// pages other processes map too, and the proportional share (Pss).
	privDirty, privClean, shared, pss float64
	sys                               float64 // bytes the Go runtime holds from the OS
	heap                              float64 // bytes, from the agent's metrics
	cpu                               float64 // cores busy over the window
}

// readUsage reads VmRSS and VmHWM from /proc/PID/status.
func readUsage(pid int) (usage, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, fmt.Errorf("vpcnetd memory: %w", err)
	}
	var u usage
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[0], 64)
		switch k {
		case "VmRSS":
			u.rss = kb * 1024
		case "VmHWM":
			u.hwm = kb * 1024
		case "RssAnon":
			u.anon = kb * 1024
		case "RssFile":
			u.file = kb * 1024
		}
	}
	return u, nil
}

// readRollup adds /proc/PID/smaps_rollup's private, shared and
// proportional memory to u.
func readRollup(pid int, u *usage) error {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return fmt.Errorf("vpcnetd memory map: %w", err)
	}
	parseRollup(string(data), u)
	return nil
}

func parseRollup(rollup string, u *usage) {
	for _, line := range strings.Split(rollup, "\n") {
		k, v, ok := strings.Cut(line, ":")
		f := strings.Fields(v)
		if !ok || len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		switch k {
		case "Private_Dirty":
			u.privDirty = kb * 1024
		case "Private_Clean":
			u.privClean = kb * 1024
		case "Shared_Clean", "Shared_Dirty":
			u.shared += kb * 1024
		case "Pss":
			u.pss = kb * 1024
		}
	}
}

// cpuTime is the process's user plus system CPU time, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s).
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("vpcnetd CPU: %w", err)
	}
	return parseCPUTime(string(data))
}

func parseCPUTime(stat string) (time.Duration, error) {
	// The command name, field 2, is in parentheses and may hold spaces.
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	f := strings.Fields(stat[end+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(utime+stime) * tick, nil
}
