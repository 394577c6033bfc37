package sim

import (
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// fields reads EC2 Query parameters. Lists are numbered from 1 ("Name.1",
// "Name.2"); structures nest with dots ("Filter.1.Value.2"). prefix
// scopes a view to one structure ("Filter.1.").
type fields struct {
	v      url.Values
	prefix string
}

func (f fields) get(name string) string { return f.v.Get(f.prefix + name) }

func (f fields) has(name string) bool {
	_, ok := f.v[f.prefix+name]
	return ok
}

// required returns a parameter that must be present and non-empty.
func (f fields) required(name string) (string, error) {
	s := f.get(name)
	if s == "" {
		return "", errorf(codeMissingParameter, "The request must contain the parameter %s", f.prefix+name)
	}
	return s, nil
}

// intOpt returns an optional integer parameter.
func (f fields) intOpt(name string) (n int, ok bool, err error) {
	s := f.get(name)
	if s == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil {
		return 0, false, errorf(codeInvalidParameterValue, "Value (%s) for parameter %s is invalid. Expected an integer.", s, f.prefix+name)
	}
	return n, true, nil
}

// boolOpt returns an optional boolean parameter.
func (f fields) boolOpt(name string) (b bool, ok bool, err error) {
	s := f.get(name)
	if s == "" {
		return false, false, nil
	}
	b, err = strconv.ParseBool(s)
	if err != nil {
		return false, false, errorf(codeInvalidParameterValue, "Value (%s) for parameter %s is invalid. Expected true or false.", s, f.prefix+name)
	}
	return b, true, nil
}

// indexes lists the N of every "name.N" or "name.N.x" key, ascending.
func (f fields) indexes(name string) []int {
	head := f.prefix + name + "."
	seen := map[int]bool{}
	for k := range f.v {
		rest, ok := strings.CutPrefix(k, head)
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(num); err == nil {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// list returns the values of a list of strings ("SecurityGroupId.N").
func (f fields) list(name string) []string {
	var out []string
	for _, n := range f.indexes(name) {
		out = append(out, f.get(name+"."+strconv.Itoa(n)))
	}
	return out
}

// structs returns a view of each member of a list of structures
// ("TagSpecification.N.").
func (f fields) structs(name string) []fields {
	var out []fields
	for _, n := range f.indexes(name) {
		out = append(out, fields{v: f.v, prefix: f.prefix + name + "." + strconv.Itoa(n) + "."})
	}
	return out
}

// tags reads "Tag.N.Key" / "Tag.N.Value" pairs.
func (f fields) tags(name string) ([]tagKV, error) {
	var out []tagKV
	for _, t := range f.structs(name) {
		k, err := t.required("Key")
		if err != nil {
			return nil, err
		}
		out = append(out, tagKV{key: k, value: t.get("Value"), hasValue: t.has("Value")})
	}
	return out, nil
}

type tagKV struct {
	key      string
	value    string
	hasValue bool
}

// tagSpecs reads TagSpecification.N for resourceType, rejecting others.
func (f fields) tagSpecs(resourceType string) ([]tagKV, error) {
	var out []tagKV
	for _, s := range f.structs("TagSpecification") {
		if rt := s.get("ResourceType"); rt != resourceType {
			return nil, errorf(codeInvalidParameterValue, "'%s' is not a valid taggable resource type for this operation; want %s.", rt, resourceType)
		}
		tags, err := s.tags("Tag")
		if err != nil {
			return nil, err
		}
		out = append(out, tags...)
	}
	return out, nil
}

// addrs parses a list of IPv4 addresses.
func (f fields) addrs(name string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range f.list(name) {
		a, err := parseAddr(s)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, errorf(codeInvalidParameterValue, "Invalid IPv4 address: %s", s)
	}
	return a, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() || p.Bits() != prefixLen || p.Masked() != p {
		return netip.Prefix{}, errorf(codeInvalidParameterValue, "Invalid IPv4 prefix %s: want an aligned /28 such as 10.0.0.16/28", s)
	}
	return p, nil
}
