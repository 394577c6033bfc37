package kube

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// eniConfigJSON is an ENIConfig object as the API server sends it.
func eniConfigJSON(spec string) []byte {
	return []byte(`{"apiVersion":"crd.k8s.amazonaws.com/v1alpha1","kind":"ENIConfig","metadata":{"name":"x"},"spec":` + spec + `}`)
}

func parseENIConfigJSON(t testing.TB, data []byte) (string, []string, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return "", nil, err
	}
	return parseENIConfig(u)
}

func TestParseENIConfigReadsSubnetAndGroups(t *testing.T) {
	subnet, groups, err := parseENIConfigJSON(t, eniConfigJSON(`{"subnet":"subnet-0a1b2c3d4e5f60718","securityGroups":["sg-1","sg-0pods"]}`))
	if err != nil || subnet != "subnet-0a1b2c3d4e5f60718" || strings.Join(groups, ",") != "sg-1,sg-0pods" {
		t.Errorf("parseENIConfig = %q, %q, %v", subnet, groups, err)
	}
}

// An ENIConfig is written by people: these used to be accepted and their
// values sent to EC2 and written to logs and Events.
func TestParseENIConfigRefusesIDsEC2WouldNotHaveGiven(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"subnet with a newline", `{"subnet":"subnet-1\nsubnet-2"}`, `spec.subnet "subnet-1\nsubnet-2" is not a subnet ID`},
		{"subnet of 100,000 characters", `{"subnet":"subnet-` + strings.Repeat("a", 100_000) + `"}`, `(100007 bytes) is not a subnet ID`},
		{"bare subnet prefix", `{"subnet":"subnet-"}`, `spec.subnet "subnet-" is not a subnet ID`},
		{"group with a space", `{"subnet":"subnet-1","securityGroups":["sg-1 sg-2"]}`, `spec.securityGroups[0]: "sg-1 sg-2" is not a security group ID`},
		{"group twice", `{"subnet":"subnet-1","securityGroups":["sg-1","sg-1"]}`, `spec.securityGroups[1]: "sg-1" is listed twice`},
		{"more groups than an ENI takes", `{"subnet":"subnet-1","securityGroups":["sg-1","sg-2","sg-3","sg-4","sg-5","sg-6","sg-7","sg-8","sg-9","sg-10","sg-11","sg-12","sg-13","sg-14","sg-15","sg-16","sg-17"]}`,
			"spec.securityGroups lists 17 groups; an ENI takes at most 16"},
		{"groups not a list", `{"subnet":"subnet-1","securityGroups":"sg-1"}`, "spec.securityGroups"},
		{"spec not an object", `"subnet-1"`, "spec.subnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subnet, groups, err := parseENIConfigJSON(t, eniConfigJSON(tt.spec))
			if err == nil {
				t.Fatalf("accepted subnet %.80q, groups %q", subnet, groups)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n got %.300s\nwant it to contain %s", err, tt.want)
			}
		})
	}
}

// FuzzParseENIConfig feeds ENIConfig objects, as JSON from the API
// server, to the parser: it never panics, and what it accepts is an ID
// EC2 could have given and at most 16 distinct groups.
func FuzzParseENIConfig(f *testing.F) {
	f.Add(eniConfigJSON(`{"subnet":"subnet-0a1b2c3d4e5f60718","securityGroups":["sg-1","sg-2"]}`))
	f.Add(eniConfigJSON(`{"subnet":"subnet-1"}`))
	f.Add(eniConfigJSON(`{"subnet":"subnt-1","securityGroups":[1,null,{}]}`))
	f.Add(eniConfigJSON(`{"subnet":["subnet-1"]}`))
	f.Add(eniConfigJSON(`null`))
	f.Add([]byte(`{"kind":"ENIConfig","spec":{"subnet":"subnet-1","securityGroups":["sg-1","sg-1"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		subnet, groups, err := parseENIConfigJSON(t, data)
		if err != nil {
			return
		}
		if !isSubnetID(subnet) {
			t.Errorf("accepted subnet %q", subnet)
		}
		if len(groups) > maxENISecurityGroups {
			t.Errorf("accepted %d groups", len(groups))
		}
		seen := map[string]bool{}
		for _, g := range groups {
			if !isGroupID(g) || seen[g] {
				t.Errorf("accepted group %q in %q", g, groups)
			}
			seen[g] = true
		}
	})
}
