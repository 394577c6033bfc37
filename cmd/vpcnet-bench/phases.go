package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// phases is how one vpcnet ADD or DEL spent its time inside the plugin,
// from its "pod added" or "pod deleted" log line.
type phases struct {
	rpc    time.Duration // the agent call (Add or Del), as the plugin saw it
	wire   time.Duration // ADD: veth, addresses, routes, rules: netlink
	unwire time.Duration // DEL: the veth pair, routes and rules: netlink
	took   time.Duration // from the command's start to the log line
}

// pluginLog is the phases of every ADD and DEL by container ID.
type pluginLog struct {
	add, del map[string]phases
}

// readPhases reads the plugin's log file.
func readPhases(path string) (pluginLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return pluginLog{}, fmt.Errorf("plugin log: %w", err)
	}
	defer f.Close()
	return parsePhases(f)
}

func parsePhases(r io.Reader) (pluginLog, error) {
	out := pluginLog{add: map[string]phases{}, del: map[string]phases{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		kv := logfmt(sc.Text())
		var p phases
		var into map[string]phases
		var fields []phaseField
		switch kv["msg"] {
		case "pod added":
			into, fields = out.add, []phaseField{{"rpc", &p.rpc}, {"wire", &p.wire}, {"took", &p.took}}
		case "pod deleted":
			into, fields = out.del, []phaseField{{"unwire", &p.unwire}, {"rpc", &p.rpc}, {"took", &p.took}}
		default:
			continue
		}
		for _, f := range fields {
			var err error
			if *f.d, err = time.ParseDuration(kv[f.key]); err != nil {
				return pluginLog{}, fmt.Errorf("plugin log line %q: field %s: %w (is the plugin built from this tree?)", sc.Text(), f.key, err)
			}
		}
		into[kv["container"]] = p
	}
	return out, sc.Err()
}

type phaseField struct {
	key string
	d   *time.Duration
}

// logfmt splits a log/slog text line into its key=value pairs; values
// may be quoted Go strings.
func logfmt(line string) map[string]string {
	out := map[string]string{}
	for line != "" {
		line = strings.TrimLeft(line, " ")
		eq := strings.IndexByte(line, '=')
		if eq <= 0 {
			break
		}
		key := line[:eq]
		line = line[eq+1:]
		var val string
		if strings.HasPrefix(line, `"`) {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				break
			}
			val, _ = strconv.Unquote(q)
			line = line[len(q):]
		} else {
			end := strings.IndexByte(line, ' ')
			if end < 0 {
				end = len(line)
			}
			val, line = line[:end], line[end:]
		}
		out[key] = val
	}
	return out
}
