package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Decode reads a checkpoint written by Encode (version "vpcnet/1") or by
// the Amazon VPC CNI (version "vpc-cni-ipam/1"), telling them apart by
// their version field. Every error names what is wrong and where, and
// starts with "checkpoint: ".
func Decode(data []byte) (State, error) {
	version, err := sniffVersion(data)
	if err != nil {
		return State{}, fmt.Errorf("checkpoint: %w", err)
	}
	var s State
	switch version {
	case Version:
		s, err = decodeV1(data)
	case AWSVersion:
		s, err = decodeAWS(data)
	default:
		return State{}, fmt.Errorf("checkpoint: unknown version %q; this build reads %q and %q (was it written by a newer vpcnet?)",
			version, Version, AWSVersion)
	}
	if err != nil {
		return State{}, fmt.Errorf("checkpoint: %w", err)
	}
	slices.SortFunc(s.Entries, func(a, b Entry) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(s.Released, func(a, b Release) int { return a.Addr.Compare(b.Addr) })
	return s, nil
}

// sniffVersion checks that data is one well-formed JSON object and returns
// its "version" field.
func sniffVersion(data []byte) (string, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return "", fmt.Errorf("empty input (%d bytes): not a checkpoint", len(data))
	}
	var head struct {
		Version *string `json:"version"`
	}
	// Unmarshal checks the syntax of the whole input before decoding, so
	// truncation and corruption anywhere are caught here.
	if err := json.Unmarshal(data, &head); err != nil {
		return "", describe(err, data, "")
	}
	if head.Version == nil {
		return "", errors.New(`no "version" field: not a vpcnet or Amazon VPC CNI checkpoint`)
	}
	return *head.Version, nil
}

func decodeV1(data []byte) (State, error) {
	var f file
	if err := strictUnmarshal(data, &f); err != nil {
		return State{}, describe(err, data, "")
	}
	if f.Assignments == nil {
		return State{}, errors.New(`no "assignments" list`)
	}
	s := State{Entries: make([]Entry, 0, len(f.Assignments))}
	for i, raw := range f.Assignments {
		where := fmt.Sprintf("assignments[%d]", i)
		var e entry
		if err := strictUnmarshal(raw, &e); err != nil {
			return State{}, describe(err, raw, where)
		}
		got, err := e.toEntry()
		if err != nil {
			return State{}, fmt.Errorf("%s: %w", where, err)
		}
		s.Entries = append(s.Entries, got)
	}
	if err := checkUnique(s.Entries, "assignments"); err != nil {
		return State{}, err
	}
	if f.Released == nil {
		return s, nil
	}
	s.ReleasesKnown = true
	for i, raw := range *f.Released {
		where := fmt.Sprintf("released[%d]", i)
		var r released
		if err := strictUnmarshal(raw, &r); err != nil {
			return State{}, describe(err, raw, where)
		}
		got, err := r.toRelease()
		if err != nil {
			return State{}, fmt.Errorf("%s: %w", where, err)
		}
		s.Released = append(s.Released, got)
	}
	if err := checkReleases(s.Released, s.Entries, "released"); err != nil {
		return State{}, err
	}
	return s, nil
}

func (r released) toRelease() (Release, error) {
	addr, err := parseAddr("address", r.Address, anyFamily)
	if err != nil {
		return Release{}, err
	}
	at, err := parseTime("releasedAt", r.ReleasedAt)
	if err != nil {
		return Release{}, err
	}
	return Release{Addr: addr, At: at}, nil
}

// parseTime reads a time as Encode writes it, refusing one Encode could
// not write back.
func parseTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, fmt.Errorf("no %s time", field)
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is not an RFC 3339 time", field, v)
	}
	// A zone offset moves year 0 or 9999 out of what Encode, writing UTC,
	// can hold; say so with the text the file holds.
	if !writableTime(at) {
		return time.Time{}, fmt.Errorf("%s %q is in year %d in UTC; a checkpoint holds years 0-9999", field, v, at.UTC().Year())
	}
	return at.UTC(), nil
}

func (e entry) toEntry() (Entry, error) {
	key := ipam.Key{Network: e.Network, ContainerID: e.ContainerID, IfName: e.IfName}
	if err := checkKey(key); err != nil {
		return Entry{}, err
	}
	addr, err := parseAddr("address", e.Address, anyFamily)
	if err != nil {
		return Entry{}, err
	}
	at, err := parseTime("assignedAt", e.AssignedAt)
	if err != nil {
		return Entry{}, err
	}
	var unrouted time.Time
	if e.UnroutedSince != "" {
		if unrouted, err = parseTime("unroutedSince", e.UnroutedSince); err != nil {
			return Entry{}, err
		}
	}
	got := Entry{
		Key:           key,
		Addr:          addr,
		Pod:           ipam.Pod{Namespace: e.PodNamespace, Name: e.PodName},
		AssignedAt:    at,
		UnroutedSince: unrouted,
	}
	if err := checkEntry(got); err != nil {
		return Entry{}, err
	}
	return got, nil
}

// strictUnmarshal is json.Unmarshal refusing fields we do not know: in our
// own format an unknown field is a sign of corruption or of a newer writer.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the end of the JSON value")
	}
	return nil
}

// describe turns an encoding/json error into one that says where the
// problem is: a line and column for syntax, a field for types. where names
// the value being decoded ("assignments[3]"); empty means the document.
func describe(err error, data []byte, where string) error {
	prefix := ""
	if where != "" {
		prefix = where + ": "
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		if strings.Contains(syntax.Error(), "unexpected end of JSON input") {
			return fmt.Errorf("%struncated: input ends at line %d in the middle of a value", prefix, lineOf(data, len(data)))
		}
		line, col := position(data, syntax.Offset)
		return fmt.Errorf("%sinvalid JSON at line %d, column %d: %s", prefix, line, col, syntax.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%struncated: input ends in the middle of a value", prefix)
	case errors.As(err, &typ):
		want := "another type"
		if typ.Type != nil {
			want = kind(typ.Type.Kind().String())
		}
		if typ.Field == "" {
			if where == "" {
				where = "the document"
			}
			return fmt.Errorf("%s is a JSON %s, want %s", where, typ.Value, want)
		}
		return fmt.Errorf("%s%q is a JSON %s, want %s", prefix, typ.Field, typ.Value, want)
	}
	return fmt.Errorf("%s%s", prefix, strings.TrimPrefix(err.Error(), "json: "))
}

func kind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice":
		return "a list"
	case "struct", "ptr", "map":
		return "an object"
	case "int64":
		return "a whole number"
	}
	return k
}

// position converts encoding/json's offset, which counts the offending
// byte, to the 1-based line and column of that byte.
func position(data []byte, offset int64) (line, col int) {
	i := min(max(int(offset)-1, 0), len(data))
	return lineOf(data, i), i - bytes.LastIndexByte(data[:i], '\n')
}

func lineOf(data []byte, off int) int { return 1 + bytes.Count(data[:off], []byte{'\n'}) }
