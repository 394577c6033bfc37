package main

import (
	"strings"
	"testing"
	"time"
)

func TestMetricsSumByLabelAndDiff(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(`# HELP vpcnet_ec2_requests_total EC2 calls.
# TYPE vpcnet_ec2_requests_total counter
vpcnet_ec2_requests_total{action="AssignPrivateIpAddresses"} 1
vpcnet_ec2_requests_total{action="DescribeNetworkInterfaces"} 2
`))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseMetrics(strings.NewReader(`vpcnet_ec2_requests_total{action="AssignPrivateIpAddresses"} 1
vpcnet_ec2_requests_total{action="DescribeNetworkInterfaces"} 5
vpcnet_ec2_requests_total{action="AttachNetworkInterface"} 2
vpcnet_rpc_duration_seconds_sum{method="add"} 0.25
vpcnet_rpc_duration_seconds_count{method="add"} 100
vpcnet_rpc_duration_seconds_count{method="del",note="a \"quoted\", value"} 3
process_resident_memory_bytes 3.2e+07
not a sample
`))
	if err != nil {
		t.Fatal(err)
	}
	d := after.Diff(before)
	if got := d.Sum("vpcnet_ec2_requests_total"); got != 5 {
		t.Errorf("calls between the scrapes = %v, want 5", got)
	}
	by := d.By("vpcnet_ec2_requests_total", "action")
	if by["DescribeNetworkInterfaces"] != 3 || by["AttachNetworkInterface"] != 2 || by["AssignPrivateIpAddresses"] != 0 {
		t.Errorf("calls by action = %v", by)
	}
	if got := after.Sum("vpcnet_rpc_duration_seconds_count", "method", "add"); got != 100 {
		t.Errorf("add count = %v", got)
	}
	if got := after.Sum("vpcnet_rpc_duration_seconds_count", "note", `a "quoted", value`); got != 3 {
		t.Errorf("sample with an escaped label value = %v, want 3", got)
	}
	if got := after.Sum("process_resident_memory_bytes"); got != 32e6 {
		t.Errorf("RSS = %v", got)
	}
}

func TestPhasesComeFromThePluginsPodAddedAndDeletedLines(t *testing.T) {
	log := `time=2026-11-22T22:00:00.000Z level=INFO msg="pod added" pid=7 container=bench-v-1 pod=default/v-1 addr=10.0.0.5 eni=eni-1 rpc=1.5ms wire=2ms took=4.25ms
time=2026-11-22T22:00:00.100Z level=INFO msg="pod deleted" pid=8 container=bench-v-1 addr=10.0.0.5 unwire=15ms rpc=1ms took=16.5ms
time=2026-11-22T22:00:00.200Z level=WARN msg="agent unreachable: unwiring the pod anyway" pid=9 container=bench-v-2
`
	got, err := parsePhases(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	wantAdd := phases{rpc: 1500 * time.Microsecond, wire: 2 * time.Millisecond, took: 4250 * time.Microsecond}
	if len(got.add) != 1 || got.add["bench-v-1"] != wantAdd {
		t.Errorf("ADD phases = %+v, want only bench-v-1: %+v", got.add, wantAdd)
	}
	wantDel := phases{unwire: 15 * time.Millisecond, rpc: time.Millisecond, took: 16500 * time.Microsecond}
	if len(got.del) != 1 || got.del["bench-v-1"] != wantDel {
		t.Errorf("DEL phases = %+v, want only bench-v-1: %+v", got.del, wantDel)
	}
}

func TestPhasesFromAnOlderPluginAreAnError(t *testing.T) {
	for line, field := range map[string]string{
		`level=INFO msg="pod added" container=c addr=10.0.0.5`:   "rpc",
		`level=INFO msg="pod deleted" container=c addr=10.0.0.5`: "unwire",
	} {
		_, err := parsePhases(strings.NewReader(line + "\n"))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: gave %v, want an error naming the field %s", line, err, field)
		}
	}
}

func TestParseBenchGroupsRunsAndDropsTheCPUSuffix(t *testing.T) {
	out := `goos: linux
pkg: github.com/vpcnet/vpcnet/ipam
BenchmarkPlan/secondary/steady-2   	  300000	      3700 ns/op	    2656 B/op	       2 allocs/op
BenchmarkPlan/secondary/steady-2   	  300000	      3900 ns/op	    2656 B/op	       2 allocs/op
BenchmarkSave250-2   	    1000	    823200 ns/op	  356989 B/op	    1024 allocs/op
PASS
ok  	github.com/vpcnet/vpcnet/ipam	12.1s
`
	order, runs, err := parseBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "BenchmarkPlan/secondary/steady" || order[1] != "BenchmarkSave250" {
		t.Fatalf("order = %v", order)
	}
	if r := runs["BenchmarkPlan/secondary/steady"]; len(r) != 2 || r[1].nsOp != 3900 || r[1].bytes != 2656 || r[1].allocs != 2 {
		t.Errorf("runs = %+v", r)
	}
	tab := microTable(order, runs)
	if got := tab.Rows[0][2:5]; got[0] != "3.7 µs" || got[2] != "3.9 µs" {
		t.Errorf("min/median/max = %v", got)
	}
}

func TestCPUTimeReadsUtimeAndStimePastACommandWithSpaces(t *testing.T) {
	stat := "4242 (vpc netd) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 25 0 0 20 0 12 0 100 0 0"
	got, err := parseCPUTime(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 1750*time.Millisecond {
		t.Errorf("cpu time = %v, want 1.75s (150 + 25 ticks)", got)
	}
	if _, err := parseCPUTime("garbage"); err == nil {
		t.Error("a malformed stat line was accepted")
	}
}

func TestPerfScriptSamplesKeepTheirProcessAndStack(t *testing.T) {
	script := "vpcnet  7212    1001001 \n" +
		"\tffffffff81593167 filemap_fault ([kernel.kallsyms])\n" +
		"\t           4ee7a runtime.osinit (/tmp/bin/vpcnet)\n" +
		"\n" +
		"kworker/u8:0-ip  12    2002002 \n" +
		"\t           8ecde [unknown] ([unknown])\n\n"
	got, err := parsePerfScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d samples, want 2", len(got))
	}
	if got[0].comm != "vpcnet" || got[0].period != 1001001 || len(got[0].frames) != 2 ||
		got[0].frames[0] != (frame{"filemap_fault", "[kernel.kallsyms]"}) || got[0].frames[1] != (frame{"runtime.osinit", "vpcnet"}) {
		t.Errorf("first sample = %+v", got[0])
	}
	if got[1].comm != "kworker/u8:0-ip" || got[1].frames[0].fn != "[unknown]" {
		t.Errorf("second sample = %+v", got[1])
	}
	if len(encodeProfile(got)) == 0 {
		t.Error("empty profile")
	}
}

func TestTimelineGroupsAttachDecisions(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	log := `{"time":"2026-01-01T00:00:00.2Z","level":"INFO","msg":"EC2 change","action":"assign"}
{"time":"2026-01-01T00:00:00.2Z","level":"INFO","msg":"EC2 change","action":"attach"}
{"time":"2026-01-01T00:00:05.6Z","level":"INFO","msg":"ENI configured"}
{"time":"2026-01-01T00:00:05.9Z","level":"INFO","msg":"EC2 change","action":"attach"}
{"time":"2026-01-01T00:00:05.9Z","level":"INFO","msg":"EC2 change","action":"attach a new ENI in subnet-a with 29 addresses (security groups sg-bench): WARM_ENI_TARGET=1"}
{"time":"2026-01-01T00:00:06.0Z","level":"INFO","msg":"EC2 change","action":"assign 29 addresses to eni-1: WARM_ENI_TARGET=1"}
not json
`
	want := "1 started +0.2 s, 1 ready +5.6 s, 2 started +5.9 s"
	if got := timeline([]byte(log), start); got != want {
		t.Errorf("timeline = %q, want %q", got, want)
	}
}

func TestRollupSplitsPrivateAndSharedMemory(t *testing.T) {
	rollup := `560082654000-7fff65978000 ---p 00000000 00:00 0                          [rollup]
Rss:                1700 kB
Pss:                 245 kB
Shared_Clean:       1556 kB
Shared_Dirty:          4 kB
Private_Clean:        32 kB
Private_Dirty:       112 kB
Anonymous:           112 kB
`
	var u usage
	parseRollup(rollup, &u)
	want := usage{privDirty: 112 << 10, privClean: 32 << 10, shared: 1560 << 10, pss: 245 << 10}
	if u != want {
		t.Errorf("rollup = %+v, want %+v", u, want)
	}
}
