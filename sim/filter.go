package sim

import (
	"slices"
	"sort"
	"strings"
)

// filter is one Filter.N of a Describe call: the resource matches when any
// of its values for name matches any of values. Filters are ANDed.
type filter struct {
	name   string
	values []string
}

// filters reads Filter.N, rejecting names the action does not support.
// Every action supports the tag filters (tag:KEY, tag-key, tag-value).
func (f fields) filters(supported ...string) ([]filter, error) {
	var out []filter
	for _, s := range f.structs("Filter") {
		name, err := s.required("Name")
		if err != nil {
			return nil, err
		}
		ok := slices.Contains(supported, name) || name == "tag-key" || name == "tag-value" ||
			(strings.HasPrefix(name, "tag:") && len(name) > len("tag:"))
		if !ok {
			return nil, errorf(codeInvalidParameterValue, "The filter '%s' is invalid", name)
		}
		out = append(out, filter{name: name, values: s.list("Value")})
	}
	return out, nil
}

// matches reports whether a resource passes every filter; attr returns the
// resource's values for a filter name.
func matches(filters []filter, attr func(name string) []string, tags map[string]string) bool {
	for _, f := range filters {
		var have []string
		switch {
		case f.name == "tag-key":
			have = sortedKeys(tags)
		case f.name == "tag-value":
			for _, k := range sortedKeys(tags) {
				have = append(have, tags[k])
			}
		case strings.HasPrefix(f.name, "tag:"):
			if v, ok := tags[strings.TrimPrefix(f.name, "tag:")]; ok {
				have = []string{v}
			}
		default:
			have = attr(f.name)
		}
		if !anyMatch(f.values, have) {
			return false
		}
	}
	return true
}

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if glob(p, v) {
				return true
			}
		}
	}
	return false
}

// glob matches EC2 filter wildcards: * is any run of characters, ? is one
// character, and a backslash makes the next character literal.
func glob(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if glob(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		case '\\':
			if len(pattern) > 1 {
				pattern = pattern[1:]
			}
			fallthrough
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return s == ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
