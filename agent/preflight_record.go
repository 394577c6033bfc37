package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/version"
)

// Preflight once per node, not once per start (issue 26). Every DryRun
// probe is a request EC2 counts against its action's bucket, which the
// whole account shares: a thousand agents restarting at once (a node
// image roll-out, a DaemonSet restart) would spend a thousand Attach
// tokens (burst 50, 5 a second) on probes before any real attach. So a
// pass that found every permission is recorded in the state directory,
// beside the checkpoint and through the same Disk, and a start that
// finds a record still valid makes no probe at all.
//
// The record holds for what made its answers true: this instance, the
// credentials' identity as far as the agent can tell (cloud.Client's
// Identity: the source, and a role ARN, profile or access key hash; a
// change of the instance profile's role is not visible from inside, so
// that is what the expiry and the invalidation below are for), the
// actions probed (new settings or a new instance type may need more) and
// the build of vpcnet (a new build may probe differently). It expires
// after preflightValidity. A pass that found a permission missing, or
// could not tell, is never recorded: the next start probes again and
// names what is missing.
//
// Why once per node and not vouched for by the budget controller: the
// controller is optional, cannot see a node's credentials (IRSA, Pod
// Identity and instance roles differ per node group), and would need a
// protocol of its own; the node's own disk already survives restarts and
// is where the checkpoint lives.

// preflightValidity is how long a passed preflight vouches for the
// node's permissions. A day: IAM policies change by hand or by a deploy,
// rarely more often, and a permission taken away is still caught sooner
// by the first real call EC2 refuses (invalidatePreflight); a node
// restarting more than daily probes once a day, seven DryRuns, which is
// nothing next to its real calls. Shorter would bring back the restart
// herd of probes for a cluster that rolls its agents every few hours.
const preflightValidity = 24 * time.Hour

// preflightFormat numbers the record's layout; another number is not read.
const preflightFormat = 1

// preflightKey is what a record is valid for.
type preflightKey struct {
	InstanceID string   `json:"instanceID"`
	Identity   string   `json:"identity"`
	Actions    []string `json:"actions"`
	Version    string   `json:"vpcnet"`
}

func (k preflightKey) equal(o preflightKey) bool {
	return k.InstanceID == o.InstanceID && k.Identity == o.Identity && k.Version == o.Version && slices.Equal(k.Actions, o.Actions)
}

// preflightRecord is the file (config.PreflightPath).
type preflightRecord struct {
	Format  int          `json:"format"`
	Key     preflightKey `json:"key"`
	Checked time.Time    `json:"checked"`
	Expires time.Time    `json:"expires"`
	// NotProbed are the actions DryRun cannot ask about, as the pass
	// reported them.
	NotProbed []string `json:"notProbed,omitempty"`
	// Invalidated, when set, says why the record no longer vouches: a
	// real call EC2 refused as unauthorized. Kept in the file (rather
	// than the file removed) so an operator reading it sees why the
	// next start probes.
	Invalidated string `json:"invalidated,omitempty"`
}

// identity is the one a client can name (cloud.Client's Identity); a
// Cloud that cannot says so, which still keys the record.
func (a *Agent) identity() string {
	if c, ok := a.cloud.(interface{ Identity() string }); ok {
		return c.Identity()
	}
	return "unknown"
}

// preflightKeyNow is the key a record must have to vouch for this start.
func (a *Agent) preflightKeyNow() preflightKey {
	self := a.info().self
	var actions []string
	for _, need := range a.neededFeatures(self.InstanceType) {
		for _, action := range need.actions {
			if !slices.Contains(actions, action) {
				actions = append(actions, action)
			}
		}
	}
	slices.Sort(actions)
	return preflightKey{InstanceID: self.InstanceID, Identity: a.identity(), Actions: actions, Version: version.Get().String()}
}

// recordedPreflight is the status a valid record vouches for, or why
// there is none ("" with ok: the record vouches).
func (a *Agent) recordedPreflight() (st introspect.IAMStatus, ok bool, why string) {
	a.pre.fileMu.Lock()
	defer a.pre.fileMu.Unlock()
	path := a.cfg.PreflightPath()
	b, err := a.disk.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, false, "no record of a passed preflight"
	}
	if err != nil {
		return st, false, fmt.Sprintf("preflight record unreadable: %v", err)
	}
	var r preflightRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Format != preflightFormat {
		return st, false, fmt.Sprintf("preflight record %s not understood (format %d): %v", path, r.Format, err)
	}
	now := a.now()
	switch {
	case r.Invalidated != "":
		return st, false, "preflight record invalidated: " + r.Invalidated
	case !now.Before(r.Expires):
		return st, false, fmt.Sprintf("preflight record expired at %s", r.Expires.Format(time.RFC3339))
	case r.Checked.After(now):
		// A clock set back cannot make a record last longer.
		return st, false, fmt.Sprintf("preflight record checked in the future (%s)", r.Checked.Format(time.RFC3339))
	case !r.Key.equal(a.preflightKeyNow()):
		return st, false, "preflight record made for another instance, identity, set of actions or build"
	}
	return introspect.IAMStatus{Checked: r.Checked, Recorded: true, NotProbed: r.NotProbed}, true, ""
}

// recordPreflight writes a pass that found every permission. A failed
// write costs only a probe at the next start: logged, not fatal.
func (a *Agent) recordPreflight(st introspect.IAMStatus) {
	if len(st.Missing) > 0 || len(st.Unknown) > 0 {
		return
	}
	r := preflightRecord{Format: preflightFormat, Key: a.preflightKeyNow(), Checked: st.Checked,
		Expires: st.Checked.Add(preflightValidity), NotProbed: st.NotProbed}
	a.writePreflight(r)
}

// invalidatePreflight marks the record as vouching no more: EC2 refused
// a real call as unauthorized (err), so what the last pass found is no
// longer true, and the next start probes again and names the action.
func (a *Agent) invalidatePreflight(err error) {
	a.pre.fileMu.Lock()
	b, rerr := a.disk.ReadFile(a.cfg.PreflightPath())
	a.pre.fileMu.Unlock()
	var r preflightRecord
	if rerr != nil || json.Unmarshal(b, &r) != nil || r.Format != preflightFormat || r.Invalidated != "" {
		return // nothing vouches: nothing to take back
	}
	r.Invalidated = fmt.Sprintf("%s: %v", a.now().UTC().Format(time.RFC3339), err)
	a.log.Warn("EC2 refused a call as unauthorized: the record of the last preflight no longer vouches for the node's permissions; the next start probes them again",
		"code", cloud.ErrorCode(err), "ec2", cloud.ErrorMessage(err), "err", err)
	a.writePreflight(r)
}

func (a *Agent) writePreflight(r preflightRecord) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("preflight record does not encode: %v", err)) // plain data: a bug
	}
	a.pre.fileMu.Lock()
	defer a.pre.fileMu.Unlock()
	if err := a.disk.WriteFile(a.cfg.PreflightPath(), b); err != nil {
		a.log.Warn("preflight record not written: the next start probes again", "path", a.cfg.PreflightPath(), "err", err)
	}
}
