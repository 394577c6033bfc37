package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// policy is the part of an IAM policy document this test reads. Unknown
// keys (NotAction, NotResource, Deny) are refused below, not ignored.
type policy struct {
	Version   string
	Statement []statement
}

type statement struct {
	Sid         string
	Effect      string
	Action      stringList
	Resource    stringList
	Condition   map[string]map[string]stringList
	NotAction   stringList
	NotResource stringList
}

// stringList is IAM's "a string or a list of strings".
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a string or a list of strings: %w", err)
	}
	*l = many
	return nil
}

// TestIAMPolicyGrantsExactlyWhatCloudCalls compares iam-policy.json with the
// EC2 actions the code in cloud/ calls: a missing action is an agent that
// fails with UnauthorizedOperation in production, an extra one is a
// permission nobody needs.
func TestIAMPolicyGrantsExactlyWhatCloudCalls(t *testing.T) {
	calls := ec2Usage(t)
	if len(calls.actions) == 0 {
		t.Fatal("found no EC2 calls in cloud/; the scan is broken")
	}

	var p policy
	dec := json.NewDecoder(strings.NewReader(string(IAMPolicy())))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("iam-policy.json: %v", err)
	}
	if p.Version != "2012-10-17" {
		t.Errorf("Version %q, want 2012-10-17 (the older language lacks policy variables and conditions on tags)", p.Version)
	}

	granted := map[string]bool{}
	var tagStatements []statement
	for _, s := range p.Statement {
		if s.Effect != "Allow" || len(s.NotAction) > 0 || len(s.NotResource) > 0 {
			t.Errorf("statement %q: want only Allow with Action and Resource, not %q / NotAction / NotResource", s.Sid, s.Effect)
		}
		for _, a := range s.Action {
			name, ok := strings.CutPrefix(a, "ec2:")
			if !ok || strings.ContainsAny(name, "*?") {
				t.Errorf("statement %q grants %q: want ec2:<Action> with no wildcard", s.Sid, a)
				continue
			}
			if name == "CreateTags" {
				tagStatements = append(tagStatements, s)
				continue
			}
			if granted[name] {
				t.Errorf("ec2:%s is granted twice", name)
			}
			granted[name] = true
		}
	}

	for _, a := range slices.Sorted(maps.Keys(calls.actions)) {
		if !granted[a] {
			t.Errorf("the policy lacks ec2:%s, which cloud/ calls at %s", a, strings.Join(calls.actions[a], ", "))
		}
	}
	for _, a := range slices.Sorted(maps.Keys(granted)) {
		if _, ok := calls.actions[a]; !ok {
			t.Errorf("the policy grants ec2:%s, which no code in cloud/ calls; remove it", a)
		}
	}
	checkTagOnCreate(t, tagStatements, calls.tagOnCreate)
}

// checkTagOnCreate: tagging on create (TagSpecifications) needs
// ec2:CreateTags, restricted by ec2:CreateAction to those create calls so it
// cannot retag anything else.
func checkTagOnCreate(t *testing.T, stmts []statement, tagOnCreate map[string][]string) {
	want := slices.Sorted(maps.Keys(tagOnCreate))
	if len(want) == 0 {
		if len(stmts) > 0 {
			t.Errorf("the policy grants ec2:CreateTags, but cloud/ tags nothing on create")
		}
		return
	}
	if len(stmts) != 1 {
		t.Fatalf("want one statement granting ec2:CreateTags for tags on %v (cloud/ sets TagSpecifications at %v), found %d", want, tagOnCreate, len(stmts))
	}
	s := stmts[0]
	if len(s.Action) != 1 {
		t.Errorf("statement %q grants %v; keep ec2:CreateTags alone, so its condition limits only it", s.Sid, s.Action)
	}
	got := slices.Sorted(slices.Values(s.Condition["StringEquals"]["ec2:CreateAction"]))
	if !slices.Equal(got, want) {
		t.Errorf("ec2:CreateTags is limited to create actions %v, want exactly %v (where cloud/ sets TagSpecifications)", got, want)
	}
	if len(s.Condition) != 1 || len(s.Condition["StringEquals"]) != 1 {
		t.Errorf("ec2:CreateTags has conditions %v; want only StringEquals ec2:CreateAction", s.Condition)
	}
}
