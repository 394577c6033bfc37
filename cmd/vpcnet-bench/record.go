package main

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Record is the JSON record of one run: everything BENCHMARKS.md is
// rendered from.
type Record struct {
	Command  string     `json:"command"`
	Machine  Machine    `json:"machine"`
	Started  time.Time  `json:"started"`
	Seconds  float64    `json:"seconds"`
	Results  []*Result  `json:"results"`
	Settings []string   `json:"settings,omitempty"`
	Goals    []GoalLine `json:"goals"`
}

// Result is one scenario's outcome.
type Result struct {
	Scenario string  `json:"scenario"`
	Seconds  float64 `json:"seconds"`
	Tables   []Table `json:"tables"`
	// Figures are the scenario's headline numbers, by name, for scripts.
	Figures map[string]float64 `json:"figures"`
	Goals   []GoalLine         `json:"goals,omitempty"`
	Err     string             `json:"error,omitempty"`
}

// GoalLine compares one figure with a goal of the benchmark issue.
type GoalLine struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

func (r *Result) figure(name string, v float64) {
	if r.Figures == nil {
		r.Figures = map[string]float64{}
	}
	r.Figures[name] = v
}

func (r *Result) goal(goal, measured string, met bool) {
	r.Goals = append(r.Goals, GoalLine{Goal: goal, Measured: measured, Met: met})
}

// Machine describes where the figures were taken.
type Machine struct {
	CPU    string `json:"cpu"`
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	MemMiB int    `json:"memMiB"`
}

func (m Machine) String() string {
	return strconv.Itoa(m.CPUs) + " vCPU " + m.CPU + ", " + strconv.Itoa(m.MemMiB/1024) + " GiB, Linux " + m.Kernel + ", " + m.Go
}

func readMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown CPU"}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = cpuModel(data)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		m.MemMiB = int(uint64(si.Totalram) * uint64(si.Unit) >> 20)
	}
	return m
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel(cpuinfo []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
