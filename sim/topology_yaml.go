package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// TopologyError is a mistake in a topology file, with the line it is on
// (0 when the file has no one place for it, such as a missing field).
type TopologyError struct {
	Line int
	// Path names the entry, as in subnets[1].cidr.
	Path string
	Err  error
}

func (e *TopologyError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *TopologyError) Unwrap() error { return e.Err }

// decodeTopology decodes a topology written in YAML (or JSON, which is
// YAML) into t. It walks the YAML tree against Topology's fields first, so
// that an unknown field or a value of the wrong kind is reported with its
// line and path; the JSON field names stay the one spelling of the file
// format, so the tree is then decoded through encoding/json.
func decodeTopology(data []byte, t *Topology) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// yaml's syntax errors read "yaml: line N: what"; keep the line
		// as a line, for FILE:LINE.
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return &TopologyError{Line: line, Err: errors.New(m[2])}
		}
		return err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return errors.New("the file is empty")
	}
	root := doc.Content[0]
	if err := checkNode(root, reflect.TypeOf(t).Elem(), ""); err != nil {
		return err
	}
	v, err := nodeValue(root)
	if err != nil {
		return err
	}
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(t)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkNode reports the first place where n does not fit typ.
func checkNode(n *yaml.Node, typ reflect.Type, path string) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // the field keeps its zero value
	}
	if reflect.PointerTo(typ).Implements(unmarshalerType) {
		return checkLeaf(n, typ, path)
	}
	fail := func(format string, a ...any) error {
		return &TopologyError{Line: n.Line, Path: path, Err: fmt.Errorf(format, a...)}
	}
	switch typ.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping of %s, got %s", strings.Join(jsonFields(typ), ", "), describeNode(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fieldByJSONName(typ, k.Value)
			if !ok {
				return &TopologyError{Line: k.Line, Path: path, Err: fmt.Errorf("unknown field %q (known: %s)", k.Value, strings.Join(jsonFields(typ), ", "))}
			}
			if err := checkNode(v, f.Type, join(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping, got %s", describeNode(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkNode(n.Content[i+1], typ.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fail("want a list, got %s", describeNode(n))
		}
		for i, e := range n.Content {
			if err := checkNode(e, typ.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		return checkLeaf(n, typ, path)
	}
	return nil
}

// checkLeaf decodes one value on its own to see that it fits typ.
func checkLeaf(n *yaml.Node, typ reflect.Type, path string) error {
	v, err := nodeValue(n)
	if err == nil {
		var js []byte
		if js, err = json.Marshal(v); err == nil {
			err = json.Unmarshal(js, reflect.New(typ).Interface())
		}
	}
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		err = fmt.Errorf("want %s, got %s", kindName(typ), describeNode(n))
	}
	return &TopologyError{Line: n.Line, Path: path, Err: err}
}

// nodeValue turns a YAML tree into the values encoding/json writes.
// Mapping keys are taken as written, so `1: x` has the key "1".
func nodeValue(n *yaml.Node) (any, error) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Tag == "!!merge" {
				return nil, &TopologyError{Line: n.Content[i].Line, Err: errors.New("merge keys (<<) are not supported")}
			}
			v, err := nodeValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, e := range n.Content {
			v, err := nodeValue(e)
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return s, nil
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, &TopologyError{Line: n.Line, Err: err}
		}
		return v, nil
	}
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func kindName(typ reflect.Type) string {
	switch typ.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return typ.String()
}

// fieldByJSONName finds the field a file key names, by its json tag.
func fieldByJSONName(typ reflect.Type, name string) (reflect.StructField, bool) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func jsonFields(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		if tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	slices.Sort(names)
	return names
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// lineOf finds the line of the entry at path (as in subnets[1].cidr) in
// the file, so a validation error can point at it; 0 if it is not there.
func lineOf(data []byte, path string) int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	n := doc.Content[0]
	for _, part := range strings.Split(path, ".") {
		key, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			key = part[:i]
			if _, err := fmt.Sscan(part[i+1:len(part)-1], &idx); err != nil {
				return 0
			}
		}
		if key != "" {
			n = mapValue(n, key)
		}
		if n != nil && idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return 0
			}
			n = n.Content[idx]
		}
		if n == nil {
			return 0
		}
	}
	return n.Line
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
