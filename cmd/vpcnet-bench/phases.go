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

// addPhases is how one vpcnet ADD spent its time inside the plugin, from
// its "pod added" log line.
type addPhases struct {
	rpc  time.Duration // the agent's Add call, as the plugin saw it
	wire time.Duration // veth, addresses, routes, rules: netlink
	took time.Duration // from cmdAdd's start to the log line
}

// readPhases reads the plugin's log file: phases by container ID.
func readPhases(path string) (map[string]addPhases, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("plugin log: %w", err)
	}
	defer f.Close()
	return parsePhases(f)
}

func parsePhases(r io.Reader) (map[string]addPhases, error) {
	out := map[string]addPhases{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		kv := logfmt(sc.Text())
		if kv["msg"] != "pod added" {
			continue
		}
		var p addPhases
		var err error
		for _, f := range []struct {
			key string
			d   *time.Duration
		}{{"rpc", &p.rpc}, {"wire", &p.wire}, {"took", &p.took}} {
			if *f.d, err = time.ParseDuration(kv[f.key]); err != nil {
				return nil, fmt.Errorf("plugin log line %q: field %s: %w (is the plugin built from this tree?)", sc.Text(), f.key, err)
			}
		}
		out[kv["container"]] = p
	}
	return out, sc.Err()
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
