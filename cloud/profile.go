package cloud

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// profile is one named profile of the shared files: its keys (lower
// case) and the file its credentials came from, for error messages.
type profile struct {
	name, file string
	values     map[string]string
}

// loadProfile reads profile name from the shared config file, then the
// shared credentials file, whose keys win (as in the SDK). A missing
// file is no error; found says whether either has the profile.
func loadProfile(name string) (_ profile, found bool, _ error) {
	p := profile{name: name, values: map[string]string{}}
	for _, f := range []struct {
		path    string
		section string
	}{
		// The config file names profiles "[profile NAME]", except
		// "[default]"; the credentials file "[NAME]".
		{configFile(), configSection(name)},
		{credentialsFile(), name},
	} {
		kv, ok, err := readSection(f.path, f.section)
		if err != nil {
			return p, false, err
		}
		if !ok {
			continue
		}
		found = true
		p.file = f.path
		for k, v := range kv {
			p.values[k] = v
		}
	}
	return p, found, nil
}

func configSection(name string) string {
	if name == "default" {
		return name
	}
	return "profile " + name
}

// readSection returns the keys of [section] in the INI file at path.
// Lines starting with # or ; are comments; nested values (indented
// lines under "key =", as s3 settings use) are skipped.
func readSection(path, section string) (map[string]string, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("shared AWS file: %w", err)
	}
	defer f.Close()
	var (
		kv    map[string]string
		found bool
		in    bool
	)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		raw := sc.Text()
		s := strings.TrimSpace(raw)
		if s == "" || s[0] == '#' || s[0] == ';' {
			continue
		}
		if s[0] == '[' {
			if !strings.HasSuffix(s, "]") {
				return nil, false, fmt.Errorf("%s:%d: section header %q has no closing ]", path, line, s)
			}
			in = strings.Join(strings.Fields(s[1:len(s)-1]), " ") == section
			if in && kv == nil {
				kv, found = map[string]string{}, true
			}
			continue
		}
		if !in || raw[0] == ' ' || raw[0] == '\t' {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, false, fmt.Errorf("%s:%d: %q is neither a section nor key = value", path, line, s)
		}
		kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return kv, found, nil
}
