package sim

import (
	"strings"
	"time"
)

// maxTags is EC2's limit of user tags per resource.
const maxTags = 50

// taggedLocked finds the tags of a resource by ID: an ENI, an instance or
// a subnet.
func (c *Cloud) taggedLocked(id string) (map[string]string, error) {
	if e, ok := c.enis[id]; ok {
		return e.tags, nil
	}
	if in, ok := c.instances[id]; ok {
		return in.tags, nil
	}
	if sn, ok := c.subnets[id]; ok {
		return sn.tags, nil
	}
	switch {
	case strings.HasPrefix(id, "eni-"):
		return nil, errorf(codeInvalidENINotFound, "The networkInterface ID '%s' does not exist", id)
	case strings.HasPrefix(id, "i-"):
		return nil, errorf(codeInvalidInstanceNotFound, "The instance ID '%s' does not exist", id)
	case strings.HasPrefix(id, "subnet-"):
		return nil, errorf(codeInvalidSubnetNotFound, "The subnet ID '%s' does not exist", id)
	}
	return nil, errorf(codeInvalidID, "The ID '%s' is not valid", id)
}

func (c *Cloud) createTags(r *request) (any, error) {
	ids := r.params.list("ResourceId")
	if len(ids) == 0 {
		return nil, errorf(codeMissingParameter, "The request must contain the parameter ResourceId")
	}
	tags, err := r.params.tags("Tag")
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, errorf(codeMissingParameter, "The request must contain the parameter Tag")
	}
	for _, t := range tags {
		if err := checkTagKey(t.key); err != nil {
			return nil, err
		}
		if len(t.value) > 256 {
			return nil, errorf(codeInvalidParameterValue, "Tag value for key '%s' exceeds 256 characters.", t.key)
		}
	}
	err = c.update(func(time.Time) error {
		var targets []map[string]string
		for _, id := range ids {
			m, err := c.taggedLocked(id)
			if err != nil {
				return err
			}
			n := len(m)
			for _, t := range tags {
				if _, ok := m[t.key]; !ok {
					n++
				}
			}
			if n > maxTags {
				return errorf(codeTagLimitExceeded, "The maximum number of tags (%d) for resource '%s' has been reached.", maxTags, id)
			}
			targets = append(targets, m)
		}
		for _, m := range targets {
			for _, t := range tags {
				m[t.key] = t.value
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok(r), nil
}

func checkTagKey(k string) error {
	switch {
	case len(k) > 128:
		return errorf(codeInvalidParameterValue, "Tag key '%s' exceeds 128 characters.", k)
	case strings.HasPrefix(strings.ToLower(k), "aws:"):
		return errorf(codeInvalidParameterValue, "Tag keys starting with 'aws:' are reserved for internal use: '%s'.", k)
	}
	return nil
}

// deleteTags removes the named tags (only where the value matches, when a
// value is given), or every tag when none is named.
func (c *Cloud) deleteTags(r *request) (any, error) {
	ids := r.params.list("ResourceId")
	if len(ids) == 0 {
		return nil, errorf(codeMissingParameter, "The request must contain the parameter ResourceId")
	}
	tags, err := r.params.tags("Tag")
	if err != nil {
		return nil, err
	}
	err = c.update(func(time.Time) error {
		var targets []map[string]string
		for _, id := range ids {
			m, err := c.taggedLocked(id)
			if err != nil {
				return err
			}
			targets = append(targets, m)
		}
		for _, m := range targets {
			if len(tags) == 0 {
				clear(m)
			}
			for _, t := range tags {
				if v, ok := m[t.key]; ok && (!t.hasValue || v == t.value) {
					delete(m, t.key)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok(r), nil
}
