package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

const topology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
securityGroups: [sg-0sim]
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
  - {id: i-node2, type: c5.large, subnet: subnet-a}
seed: 1
`

func TestSimServeServesUntilSIGTERM(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "vpcnetctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	topo := filepath.Join(dir, "topology.yaml")
	if err := os.WriteFile(topo, []byte(topology), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "sim", "serve", "--topology", topo)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	lines := readUntilReady(t, stdout)
	var ec2URL string
	imdsURL := map[string]string{}
	for _, l := range lines {
		f := strings.Fields(l)
		switch f[0] {
		case "ec2":
			ec2URL = f[1]
		case "imds":
			imdsURL[f[1]] = f[2]
		}
	}
	if !strings.HasPrefix(ec2URL, "http://127.0.0.1:") || len(imdsURL) != 2 {
		t.Fatalf("endpoints: ec2 %q, imds %v\n%s", ec2URL, imdsURL, strings.Join(lines, "\n"))
	}

	ctx := context.Background()
	client := ec2.NewFromConfig(aws.Config{
		Region:       "us-west-2",
		Credentials:  credentials.NewStaticCredentialsProvider("sim", "sim", ""),
		BaseEndpoint: aws.String(ec2URL),
	})
	out, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatalf("DescribeInstances: %v", err)
	}
	if len(out.Reservations) != 2 {
		t.Errorf("%d reservations, want 2", len(out.Reservations))
	}
	md, err := imds.New(imds.Options{Endpoint: imdsURL["i-node2"]}).GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-id"})
	if err != nil {
		t.Fatalf("IMDS: %v", err)
	}
	id, _ := io.ReadAll(md.Content)
	if string(id) != "i-node2" {
		t.Errorf("i-node2's IMDS says instance-id %q", id)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10s after SIGTERM")
	}
}

// readUntilReady collects stdout lines up to "ready".
func readUntilReady(t *testing.T, r io.Reader) []string {
	t.Helper()
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	var got []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("exited before ready; printed:\n%s", strings.Join(got, "\n"))
			}
			if l == "ready" {
				go func() {
					for range lines {
					}
				}()
				return got
			}
			got = append(got, l)
		case <-timeout:
			t.Fatalf("not ready after 30s; printed:\n%s", strings.Join(got, "\n"))
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"sim"}, "sim serve --topology FILE"},
		{[]string{"sim", "serve"}, "--topology FILE"},
		{[]string{"sim", "serve", "--topology", "x.yaml", "--imds-listen", "nonsense"}, ""},
	}
	for _, tt := range tests {
		var out, errw bytes.Buffer
		code := run(context.Background(), tt.args, &out, &errw)
		if tt.want == "" {
			// A missing topology file is an error, not a usage mistake.
			if code != 1 || !strings.Contains(errw.String(), "x.yaml") {
				t.Errorf("%v: exit %d, stderr %q; want 1 naming the file", tt.args, code, errw.String())
			}
			continue
		}
		if code != 2 || !strings.Contains(errw.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errw.String(), tt.want)
		}
	}
}

// Every sim command answers --help (and -h) with its usage and exit
// status 0. `sim pod --help` used to fail before its flags were parsed,
// and `sim serve --help` printed "flag: help requested".
func TestSimHelpExitsZeroWithUsage(t *testing.T) {
	cmds := [][]string{
		{"sim"}, {"sim", "serve"}, {"sim", "demo"}, {"sim", "up"}, {"sim", "run"}, {"sim", "down"},
		{"sim", "status"}, {"sim", "pod"}, {"sim", "pod", "add"}, {"sim", "pod", "del"}, {"sim", "pod", "list"},
		{"sim", "agent"}, {"sim", "agent", "stop"},
	}
	for _, c := range cmds {
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string(nil), c...), h)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var out, errw bytes.Buffer
				code := run(context.Background(), args, &out, &errw)
				all := out.String() + errw.String()
				want := "usage: vpcnetctl " + strings.Join(c[:min(2, len(c))], " ")
				if code != 0 || !strings.Contains(all, want) || strings.Contains(all, "help requested") {
					t.Errorf("exit %d, output:\n%s\nwant 0 and %q", code, all, want)
				}
			})
		}
	}
}

// A broken topology stops `sim up` before anything starts, on the
// terminal, naming the file and line: no background process, no log.
func TestSimUpRejectsABadTopologyBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	topo := filepath.Join(dir, "bad.yaml")
	bad := strings.Replace(topology, "  - {id: i-node2, type: c5.large, subnet: subnet-a}", "  - {id: i-node2, type: c5.large, subnet: subnet-a, zone: b}", 1)
	if err := os.WriteFile(topo, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	var out, errw bytes.Buffer
	code := run(context.Background(), []string{"sim", "up", "--topology", topo, "--state", state, "--bin", dir}, &out, &errw)
	if code != 1 || !strings.Contains(errw.String(), topo+":9:") || !strings.Contains(errw.String(), `unknown field "zone"`) {
		t.Errorf("exit %d, stderr %q; want 1 naming %s:9 and the unknown field", code, errw.String(), topo)
	}
	if _, err := os.Stat(filepath.Join(state, "sim.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sim.log exists (%v): a background process was started for a topology that cannot work", err)
	}
}

// Hints repeat the --state in use, so pasting one acts on the same
// cluster; the default state directory is left out as the user left it.
func TestSimCmdRepeatsTheStateInUse(t *testing.T) {
	tests := []struct {
		state string
		args  []string
		want  string
	}{
		{defaultStateDir, []string{"down"}, "vpcnetctl sim down"},
		{defaultStateDir + "/", []string{"status"}, "vpcnetctl sim status"},
		{"/tmp/a", []string{"pod", "add", "i-node1", "web-1"}, "vpcnetctl sim pod add i-node1 web-1 --state /tmp/a"},
		{"/tmp/my cluster", []string{"down"}, "vpcnetctl sim down --state '/tmp/my cluster'"},
	}
	for _, tt := range tests {
		if got := simCmd(tt.state, tt.args...); got != tt.want {
			t.Errorf("simCmd(%q, %q) = %q, want %q", tt.state, tt.args, got, tt.want)
		}
	}
}
