package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
)

// Sample is one line of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is one scrape of an agent's /metrics.
type Metrics []Sample

// parseMetrics reads the Prometheus text exposition format, which is all
// the agent serves; comments and malformed lines are skipped.
func parseMetrics(r io.Reader) (Metrics, error) {
	var out Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSample(line)
		if ok {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

func parseSample(line string) (Sample, bool) {
	s := Sample{Labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return s, false
	} else if line[i] == '{' {
		s.Name = line[:i]
		end := strings.LastIndexByte(line, '}')
		if end < i {
			return s, false
		}
		if !parseLabels(line[i+1:end], s.Labels) {
			return s, false
		}
		rest = line[end+1:]
	} else {
		s.Name = line[:i]
		rest = line[i:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.Value = v
	return s, true
}

// parseLabels reads `a="x",b="y"`; values may contain escaped quotes.
func parseLabels(s string, into map[string]string) bool {
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return false
		}
		name := strings.TrimSpace(s[:eq])
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return false
		}
		into[name] = val.String()
		s = strings.TrimPrefix(strings.TrimSpace(s[i+1:]), ",")
	}
	return true
}

// Sum adds the samples of name whose labels include every pair in match
// (given as "k", "v", ...).
func (m Metrics) Sum(name string, match ...string) float64 {
	var total float64
	for _, s := range m {
		if s.Name == name && s.matches(match) {
			total += s.Value
		}
	}
	return total
}

// By sums the samples of name per value of label.
func (m Metrics) By(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.Name == name {
			out[s.Labels[label]] += s.Value
		}
	}
	return out
}

func (s Sample) matches(match []string) bool {
	for i := 0; i+1 < len(match); i += 2 {
		if s.Labels[match[i]] != match[i+1] {
			return false
		}
	}
	return true
}

// Diff is m minus an earlier scrape before, sample by sample: what
// counters and histograms gained in between. Gauges come out as their
// change, so read them from m itself.
func (m Metrics) Diff(before Metrics) Metrics {
	prev := map[string]float64{}
	for _, s := range before {
		prev[s.key()] = s.Value
	}
	out := make(Metrics, 0, len(m))
	for _, s := range m {
		d := s
		d.Value -= prev[s.key()]
		out = append(out, d)
	}
	return out
}

func (s Sample) key() string {
	var b strings.Builder
	b.WriteString(s.Name)
	for _, k := range sortedKeys(s.Labels) {
		fmt.Fprintf(&b, ",%s=%q", k, s.Labels[k])
	}
	return b.String()
}

// metricsAddr is where vpcnetd serves /metrics inside its node's
// namespace (VPCNET_METRICS_BIND_ADDRESS's default, :61678).
const metricsAddr = "127.0.0.1:61678"

// scrape reads an agent's /metrics from inside the node's namespace.
func scrape(ctx context.Context, netns string) (Metrics, error) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return fabric.Dial(ctx, netns, network, addr)
		},
		DisableKeepAlives: true,
	}, Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape vpcnetd metrics in %s: %w", netns, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape vpcnetd metrics in %s: %s", netns, resp.Status)
	}
	return parseMetrics(resp.Body)
}
