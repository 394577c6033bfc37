package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// setting is one environment variable: how to parse it into a Config and
// how to show it back.
type setting struct {
	name    string
	def     string // default, as the variable would be written
	docDef  string // shown instead of def when def alone would mislead
	meaning string
	// set parses v into c. Its error completes "NAME=value: " and says
	// what is allowed.
	set func(c *Config, v string) error
	get func(c *Config) string
}

func intVar(name, def, meaning string, lo, hi int, field func(*Config) *int) setting {
	allowed := fmt.Sprintf("must be a whole number from %d to %d", lo, hi)
	if hi == maxInt {
		allowed = fmt.Sprintf("must be a whole number ≥ %d", lo)
	}
	return setting{name: name, def: def, meaning: meaning,
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < lo || n > hi {
				return errors.New(allowed)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(*field(c)) },
	}
}

const maxInt = int(^uint(0) >> 1)

func boolVar(name, def, meaning string, field func(*Config) *bool) setting {
	return setting{name: name, def: def, meaning: meaning,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("must be true or false")
			}
			*field(c) = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

func durationVar(name, def, meaning string, least time.Duration, field func(*Config) *time.Duration) setting {
	return setting{name: name, def: def, meaning: meaning,
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < least {
				return fmt.Errorf("must be a duration such as 30s, 5m or 1h30m, at least %s", least)
			}
			*field(c) = d
			return nil
		},
		get: func(c *Config) string { return field(c).String() },
	}
}

// stringVar is a setting checked by check, which returns what is allowed.
func stringVar(name, def, meaning string, check func(string) error, field func(*Config) *string) setting {
	return setting{name: name, def: def, meaning: meaning,
		set: func(c *Config, v string) error {
			if check != nil {
				if err := check(v); err != nil {
					return err
				}
			}
			*field(c) = v
			return nil
		},
		get: func(c *Config) string { return *field(c) },
	}
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("must be one of %s", strings.Join(values, ", "))
		}
		return nil
	}
}

func absPath(v string) error {
	if !filepath.IsAbs(v) || filepath.Clean(v) != v {
		return errors.New("must be an absolute path with no . or .. parts, such as /var/lib/vpcnet")
	}
	return nil
}

func optionalAbsPath(v string) error {
	if v == "" {
		return nil
	}
	return absPath(v)
}

func optionalURL(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return errors.New("must be an http:// or https:// URL with a host and no user, such as http://127.0.0.1:8080")
	}
	return nil
}

// bindAddr accepts host:port, as net.Listen("tcp", ...) does, or
// unix:/path, as the Amazon VPC CNI's INTROSPECTION_BIND_ADDRESS does.
func bindAddr(v string) error {
	const allowed = "must be host:port (such as 127.0.0.1:61679 or :61678; port 0 picks a free one) or unix:/absolute/path"
	if path, ok := strings.CutPrefix(v, "unix:"); ok {
		if !filepath.IsAbs(path) {
			return errors.New(allowed)
		}
		return nil
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New(allowed)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New(allowed)
	}
	return nil
}

var (
	dnsLabel     = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	dnsSubdomain = regexp.MustCompile(`^` + dnsLabel + `(\.` + dnsLabel + `)*$`)
	labelName    = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	ifaceChars   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// nodeName accepts what Kubernetes accepts as a Node name.
func nodeName(v string) error {
	if v != "" && (len(v) > 253 || !dnsSubdomain.MatchString(v)) {
		return errors.New("must be a Kubernetes node name: lower-case letters, digits, '-' and '.', at most 253 characters")
	}
	return nil
}

// optionalLeaseRef accepts "" or NAMESPACE/NAME of an object.
func optionalLeaseRef(v string) error {
	if v == "" {
		return nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok || len(ns) > 63 || len(name) > 253 || !dnsSubdomain.MatchString(ns) || !dnsSubdomain.MatchString(name) || strings.Contains(ns, ".") {
		return errors.New("must be NAMESPACE/NAME of a Lease, such as kube-system/vpcnet-budget")
	}
	return nil
}

// labelKey accepts a Kubernetes label, annotation or taint key: an
// optional DNS subdomain prefix and a slash, then a name of up to 63
// characters.
func labelKey(v string) error {
	const allowed = "must be a Kubernetes key such as example.com/name: [prefix/]name, name at most 63 letters, digits, '-', '_' or '.'"
	prefix, name, hasPrefix := strings.Cut(v, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if len(name) > 63 || !labelName.MatchString(name) {
		return errors.New(allowed)
	}
	if hasPrefix && (len(prefix) > 253 || !dnsSubdomain.MatchString(prefix)) {
		return errors.New(allowed)
	}
	return nil
}

func optionalLabelKey(v string) error {
	if v == "" {
		return nil
	}
	return labelKey(v)
}

// vethPrefix follows the Amazon VPC CNI: at most 4 characters, leaving
// room for 11 hex digits in a 15-character interface name, and not a
// prefix the kernel or the CNI uses for other links.
func vethPrefix(v string) error {
	if len(v) > 4 || !ifaceChars.MatchString(v) || slices.Contains([]string{"eth", "vlan", "lo"}, v) {
		return errors.New("must be 1 to 4 letters, digits, '-' or '_', and not eth, vlan or lo")
	}
	return nil
}

func cniConfName(v string) error {
	if strings.ContainsRune(v, '/') || !strings.HasSuffix(v, ".conflist") || v == ".conflist" || strings.HasPrefix(v, ".") {
		return errors.New("must be a file name ending in .conflist, such as 10-vpcnet.conflist")
	}
	return nil
}

func maxLen(n int) func(string) error {
	return func(v string) error {
		if len(v) > n {
			return fmt.Errorf("must be at most %d characters", n)
		}
		return nil
	}
}

func mustBe(want, why string) func(string) error {
	return func(v string) error {
		if b, err := strconv.ParseBool(v); err != nil || fmt.Sprint(b) != want {
			return fmt.Errorf("must be %s: %s", want, why)
		}
		return nil
	}
}

// cniNetworkName follows the CNI spec's rule for network names.
func cniNetworkName(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	for i, r := range v {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '_' || r == '.' || r == '-'))
		if !ok {
			return errors.New("must be letters and digits, then also '_', '.' or '-' (the CNI spec's network name)")
		}
	}
	return nil
}
