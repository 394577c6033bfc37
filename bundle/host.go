package bundle

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// The host's networking is collected by running `ip -d -j` and `nft -j`
// rather than through netlink and nftables libraries: their JSON decodes
// every attribute the kernel reports (a library would need our own
// encoding of each type, and drops what it does not know), it is the
// format a support engineer can replay with the same commands on a good
// node, and the bundle runs as the same user who would run them by hand.
// The cost: the bundle needs iproute2 and nftables on the node (the
// agent's distroless image has neither; run `vpcnetctl bundle` on the
// host, or from a debug container with them).
var hostCommands = []struct {
	file string
	argv []string
}{
	{"host/ip-link.json", []string{"ip", "-d", "-j", "link", "show"}},
	{"host/ip-addr.json", []string{"ip", "-d", "-j", "addr", "show"}},
	{"host/ip-rule.json", []string{"ip", "-d", "-j", "rule", "show"}},
	{"host/ip-neigh.json", []string{"ip", "-d", "-j", "neigh", "show"}},
	{"host/ip-route-all.json", []string{"ip", "-d", "-j", "route", "show", "table", "all"}},
	// The whole ruleset: vpcnet's tables and aws-node's (iptables-nft
	// writes its chains as nftables tables too).
	{"host/nft-ruleset.json", []string{"nft", "-j", "list", "ruleset"}},
	// aws-node on iptables-legacy keeps its chains out of nftables.
	{"host/iptables-save.txt", []string{"iptables-save"}},
	{"host/sysctl-net.txt", []string{"sysctl", "net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter"}},
}

func addHost(ctx context.Context, a *Archive, o Options) error {
	for _, c := range hostCommands {
		out, _, err := o.Run(ctx, c.argv[0], c.argv[1:], nil)
		if err := a.Add(c.file, out, err); err != nil {
			return err
		}
	}
	return nil
}

// commandTimeout bounds one command: a hung `nft` or plugin must not hang
// the bundle.
const commandTimeout = 20 * time.Second

// RunCommand runs name with args, env added to this process's
// environment, and returns its stdout and stderr. A failure's error
// carries the command line and the start of its stderr.
func RunCommand(ctx context.Context, name string, args []string, env []string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(cmd.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &stdout, max: DefaultPartLimit}
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 64 << 10}
	err := cmd.Run()
	if err != nil {
		// The start of stderr says what went wrong; the rest is usage.
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if msg != "" {
			return stdout.Bytes(), stderr.Bytes(), fmt.Errorf("%s: %w: %s", strings.Join(append([]string{name}, args...), " "), err, msg)
		}
		return stdout.Bytes(), stderr.Bytes(), fmt.Errorf("%s: %w", strings.Join(append([]string{name}, args...), " "), err)
	}
	return stdout.Bytes(), stderr.Bytes(), nil
}

// limitedBuffer keeps the first max bytes and discards the rest, without
// failing the writer (a failing pipe would kill the command).
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}
