package gen

import (
	"strings"
	"testing"
)

const head = "# comment\ninstance_type,max_enis,ipv4_per_eni,hypervisor,bare_metal,default_card,cards\n"

func TestGenerateRefusesBadRows(t *testing.T) {
	tests := []struct {
		name string
		csv  string
		want string
	}{
		{"wrong header", "instance_type,max_enis,ipv4,hypervisor,bare_metal,default_card,cards\n", "header is"},
		{"no rows", head, "no instance types"},
		{"zero ENIs", head + "m5.large,0,10,nitro,false,0,0:0\n", "line 3 (m5.large): max_enis \"0\""},
		{"bad number", head + "m5.large,3,ten,nitro,false,0,0:3\n", "ipv4_per_eni \"ten\""},
		{"bad hypervisor", head + "m5.large,3,10,kvm,false,0,0:3\n", "hypervisor \"kvm\""},
		{"bad bool", head + "m5.large,3,10,nitro,maybe,0,0:3\n", "bare_metal \"maybe\""},
		{"cards disagree", head + "m5.large,3,10,nitro,false,0,0:4\n", "does not match the default card"},
		{"cards skip index", head + "m5.large,3,10,nitro,false,0,0:3;2:3\n", "indexes counting up from 0"},
		{"unsorted", head + "m5.xlarge,4,15,nitro,false,0,0:4\nm5.large,3,10,nitro,false,0,0:3\n", "line 4: \"m5.large\" is out of order"},
		{"repeated", head + "m5.large,3,10,nitro,false,0,0:3\nm5.large,3,10,nitro,false,0,0:3\n", "out of order or repeated"},
		{"short row", head + "m5.large,3,10,nitro,false,0\n", "wrong number of fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Generate([]byte(tt.csv))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Generate error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestGenerateWritesEveryRow(t *testing.T) {
	src := head + "a1.large,3,10,nitro,false,0,0:3\nx.metal,2,4,unknown,true,1,0:1;1:2\n"
	out, err := Generate([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"DO NOT EDIT.",
		"var table = [2]Limits{",
		`{"a1.large", 3, 10, Nitro, false, 0, []Card{{0, 3}}},`,
		`{"x.metal", 2, 4, UnknownHypervisor, true, 1, []Card{{0, 1}, {1, 2}}},`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("generated source lacks %q:\n%s", want, out)
		}
	}
}
