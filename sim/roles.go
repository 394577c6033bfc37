package sim

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// IAM as the emulator models it. EC2 knows the caller by its credentials;
// here a request whose access key ID is an instance ID (the SigV4
// Authorization header's Credential=i-0abc.../...) comes from that
// instance's role, as if signed with the instance profile's credentials.
// Any other key, and an instance without a role, may call every action.
// A denied action is refused with UnauthorizedOperation (HTTP 403) before
// DryRun is looked at, so a DryRun request tells whether the role may
// call it, as in EC2.

// role is a topology role, resolved for lookups.
type role struct {
	name string
	deny map[string]bool
}

// rolesByInstance resolves each instance's role; instances without one
// are absent.
func rolesByInstance(t *Topology) map[string]role {
	out := map[string]role{}
	for _, in := range t.Instances {
		spec, ok := t.Roles[in.Role]
		if in.Role == "" || !ok {
			continue
		}
		r := role{name: in.Role, deny: map[string]bool{}}
		for _, a := range spec.Deny {
			r.deny[a] = true
		}
		out[in.ID] = r
	}
	return out
}

var credentialKey = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// callerInstance is the instance whose credentials signed hr, or "".
func callerInstance(hr *http.Request) string {
	key := hr.Form.Get("X-Amz-Credential") // presigned query
	if key != "" {
		key, _, _ = strings.Cut(key, "/")
	} else if m := credentialKey.FindStringSubmatch(hr.Header.Get("Authorization")); m != nil {
		key = m[1]
	}
	if !strings.HasPrefix(key, "i-") {
		return ""
	}
	return key
}

// authorize refuses action when the caller's role denies it, or denies
// what the request needs besides: CreateTags for tags given on create.
func (c *Cloud) authorize(hr *http.Request, action string, params fields) *apiError {
	inst := callerInstance(hr)
	r, ok := c.roles[inst]
	if !ok {
		return nil
	}
	needed := []string{action}
	if params.has("TagSpecification.1.ResourceType") {
		needed = append(needed, "CreateTags")
	}
	i := slices.IndexFunc(needed, func(a string) bool { return r.deny[a] })
	if i < 0 {
		return nil
	}
	return errorf(codeUnauthorizedOperation,
		"You are not authorized to perform this operation. User: arn:aws:sts::%s:assumed-role/%s/%s is not authorized to perform: ec2:%s because no identity-based policy allows the ec2:%s action",
		c.accountID, r.name, inst, needed[i], needed[i])
}
