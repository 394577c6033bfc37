package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/limits"
)

// IAM preflight (issue 12): at start each EC2 action the enabled features
// need is tried with DryRun, so a missing permission is named at once
// (the action, the feature that needs it, the policy line to add) instead
// of one failure at a time (aws/amazon-vpc-cni-k8s #3704). The agent then
// runs without that feature rather than exiting; readiness is untouched,
// and fails only when pods cannot get addresses.

// Features whose EC2 permissions the preflight checks.
const (
	FeatureReadENIs    = "reading the node's ENIs"
	FeatureGrow        = "attaching new ENIs"
	FeatureShrink      = "detaching and deleting surplus ENIs"
	FeatureLeakedENIs  = "leaked-ENI collection"
	FeatureENIConfig   = "custom networking (the ENIConfig subnet's zone and CIDR)"
	FeatureTypeFromEC2 = "limits of instance types missing from the table"
)

// preflightMaxBackoff bounds the wait before asking again about actions
// EC2 did not answer for.
const preflightMaxBackoff = 5 * time.Minute

// notProbed are actions vpcnet calls that EC2 cannot DryRun.
var notProbed = []string{"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses"}

// featureNeed is a feature and the actions it calls.
type featureNeed struct {
	feature string
	actions []string
}

// neededFeatures are the features the settings turn on, with their
// actions. CreateTags stands for tagging ENIs as they are created.
func (a *Agent) neededFeatures(instanceType string) []featureNeed {
	needs := []featureNeed{
		{FeatureReadENIs, []string{"DescribeNetworkInterfaces"}},
		{FeatureGrow, []string{"CreateNetworkInterface", "CreateTags", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute"}},
		{FeatureShrink, []string{"DetachNetworkInterface", "DeleteNetworkInterface"}},
	}
	if !a.cfg.DisableLeakedENICleanup {
		needs = append(needs, featureNeed{FeatureLeakedENIs, []string{"DescribeNetworkInterfaces", "DeleteNetworkInterface"}})
	}
	if a.cfg.CustomNetwork {
		needs = append(needs, featureNeed{FeatureENIConfig, []string{"DescribeSubnets"}})
	}
	if _, known := limits.Lookup(instanceType); !known {
		needs = append(needs, featureNeed{FeatureTypeFromEC2, []string{"DescribeInstanceTypes"}})
	}
	return needs
}

// policyLine is what to add to the node's IAM policy for action, as in
// deploy/iam-policy.json.
func policyLine(action string) string {
	if action == "CreateTags" {
		return `{"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*", "Condition": {"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}}} (statement VpcnetTagENIsAsItCreatesThem of deploy/iam-policy.json)`
	}
	return fmt.Sprintf(`{"Effect": "Allow", "Action": "ec2:%s", "Resource": "*"} (in statement VpcnetNodeENIs of deploy/iam-policy.json)`, action)
}

// preflight is the agent's record of what EC2 permits.
type preflight struct {
	mu     sync.Mutex // guards below
	status introspect.IAMStatus
	done   chan struct{} // closed after the first pass
	once   sync.Once
	// kicked is when a refused call last started a pass.
	kicked time.Time
	// fileMu serialises the record's reads and writes (config's
	// PreflightPath): jobs invalidate it from their own goroutines.
	fileMu sync.Mutex
	// again asks runPreflight for a new pass: a real call was refused
	// as unauthorized. Kicks coalesce.
	again chan struct{}
}

func newPreflight() *preflight {
	return &preflight{done: make(chan struct{}), again: make(chan struct{}, 1)}
}

// Permitted waits for the preflight's first pass and reports whether
// feature may run: none of its actions was denied. An action EC2 did not
// answer for yet counts as permitted: the feature's own calls will tell.
// It returns false when ctx ends first.
func (a *Agent) Permitted(ctx context.Context, feature string) bool {
	select {
	case <-ctx.Done():
		return false
	case <-a.pre.done:
	}
	a.pre.mu.Lock()
	defer a.pre.mu.Unlock()
	return !slices.Contains(a.pre.status.FeaturesOff, feature)
}

func (p *preflight) snapshot() introspect.IAMStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.status
	st.Missing = slices.Clone(st.Missing)
	st.Unknown = slices.Clone(st.Unknown)
	st.FeaturesOff = slices.Clone(st.FeaturesOff)
	return st
}

// runPreflight takes a valid record's word (preflight_record.go), or
// probes until every action has an answer (allowed or denied), backing
// off while EC2 does not answer; then it waits until a real call is
// refused as unauthorized, and probes again at once, so /v1/status,
// doctor and the log name the permission that went missing.
func (a *Agent) runPreflight(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			a.preflightPass(ctx)
			select {
			case <-ctx.Done():
				return
			case <-a.pre.again:
			}
		}
	}()
}

// preflightPass is one pass of runPreflight.
func (a *Agent) preflightPass(ctx context.Context) {
	st, ok, why := a.recordedPreflight()
	if ok {
		a.log.Info("IAM preflight: a passed preflight of this node is recorded and still valid; no probe", "checked", st.Checked, "path", a.cfg.PreflightPath())
		a.notePreflight(st)
		return
	}
	a.log.Info("IAM preflight: probing EC2 with DryRun", "why", why)
	backoff := time.Second
	for {
		st = a.probe(ctx)
		// Recorded before it is published: whoever learns of the pass
		// (Permitted) may rely on the next start not probing.
		a.recordPreflight(st)
		a.notePreflight(st)
		if len(st.Unknown) == 0 {
			return
		}
		if !clock.Sleep(a.clk, backoff, ctx.Done()) {
			return
		}
		backoff = min(2*backoff, preflightMaxBackoff)
	}
}

// PreflightCalls are the EC2 actions the IAM preflight would call now,
// for a driver that runs the agent on one thread (the scale driver) and
// asks a budget before: nil when a valid record vouches for the node's
// permissions. Call after Start.
func (a *Agent) PreflightCalls() []string {
	if _, ok, _ := a.recordedPreflight(); ok {
		return nil
	}
	return a.probeCalls()
}

// Preflight is one pass of the IAM preflight for a driver that runs the
// agent on one thread, after Start: the record's word when it is valid,
// else one probe of every action, recorded when it found every
// permission. It never waits: actions EC2 did not answer for stay
// unknown (vpcnetd's runPreflight asks again after a backoff). It
// reports whether it probed EC2.
func (a *Agent) Preflight(ctx context.Context) (probed bool) {
	if st, ok, _ := a.recordedPreflight(); ok {
		a.notePreflight(st)
		return false
	}
	st := a.probe(ctx)
	a.recordPreflight(st)
	a.notePreflight(st)
	return true
}

// preflightReprobeEvery spaces the passes a refused call starts: a
// denial DryRun does not reproduce (a condition on tags, IAM's eventual
// consistency) would otherwise start a pass, six tokens, at every growth
// retry.
const preflightReprobeEvery = time.Hour

// refused tells the preflight of a real call EC2 refused: an unauthorized
// answer means the permissions changed since the last pass, so the
// record stops vouching and vpcnetd probes again (at most once per
// preflightReprobeEvery). A refused action DryRun cannot ask about
// (notProbed) changes neither: a probe would find nothing, and record a
// pass again; the machine names it to the pods and in /v1/status.
func (a *Agent) refused(err error) {
	if err == nil || !cloud.IsUnauthorized(err) || slices.Contains(notProbed, cloud.ErrorAction(err)) {
		return
	}
	a.invalidatePreflight(err)
	a.pre.mu.Lock()
	now := a.now()
	kick := a.pre.kicked.IsZero() || now.Sub(a.pre.kicked) >= preflightReprobeEvery
	if kick {
		a.pre.kicked = now
	}
	a.pre.mu.Unlock()
	if !kick {
		return
	}
	select {
	case a.pre.again <- struct{}{}:
	default:
	}
}

// probeCalls are the actions a probe calls, each once, for the budget:
// the primary ENI's read, then every DryRun the features need.
// CreateTags is asked with a CreateNetworkInterface DryRun (tags on
// create), so it is that action's call.
func (a *Agent) probeCalls() []string {
	calls := []string{"DescribeNetworkInterfaces"}
	for _, need := range a.neededFeatures(a.info().self.InstanceType) {
		for _, action := range need.actions {
			if action == "CreateTags" {
				action = "CreateNetworkInterface"
			}
			if !slices.Contains(calls, action) && len(calls) < budgetapi.MaxNames {
				calls = append(calls, action)
			}
		}
	}
	return calls
}

// probe asks EC2 about every action the features need, once each.
func (a *Agent) probe(ctx context.Context) introspect.IAMStatus {
	self := a.info().self
	t := cloud.DryRunTarget{InstanceID: self.InstanceID, InstanceType: self.InstanceType,
		SubnetID: self.Primary.SubnetID, SecurityGroups: self.Primary.SecurityGroups, ENIID: self.Primary.ID}
	st := introspect.IAMStatus{Checked: a.now(), NotProbed: slices.Clone(notProbed)}
	answers := map[string]error{}
	unknown := func(action string, err error) {
		st.Unknown = append(st.Unknown, fmt.Sprintf("ec2:%s: %v", action, err))
	}
	ask := func(action string) {
		if _, done := answers[action]; done {
			return
		}
		err := a.cloud.DryRun(ctx, action, t)
		answers[action] = err
		if err != nil && !cloud.IsUnauthorized(err) {
			unknown(action, err)
		}
	}
	// A thousand agents starting together probe together, and a DryRun
	// is a request like any other to EC2's throttling (whether it takes
	// a token from the action's bucket is not documented): the budget,
	// if any, grants the probe's calls as warm-pool work, after pods.
	if a.budget != nil {
		if err := a.budget.Acquire(ctx, a.probeCalls(), func() budgetapi.Need { return budgetapi.Need{} }); err != nil {
			unknown("DescribeNetworkInterfaces", err)
			return st
		}
	}
	// The primary ENI's attachment, which Detach and Modify name. The
	// read is a real DescribeNetworkInterfaces call: its answer is that
	// action's, with no DryRun besides (one call per action, as the
	// budget granted).
	var attachErr error
	if enis, err := a.cloud.DescribeENIs(ctx, self.Primary.ID); err != nil {
		attachErr = err
		if cloud.IsUnauthorized(err) {
			answers["DescribeNetworkInterfaces"] = err
		}
	} else {
		answers["DescribeNetworkInterfaces"] = nil
		if len(enis) == 1 && enis[0].Attachment != nil {
			t.AttachmentID = enis[0].Attachment.ID
		}
	}
	for _, need := range a.neededFeatures(self.InstanceType) {
		for _, action := range need.actions {
			switch {
			case action == "CreateNetworkInterface" || action == "CreateTags":
				// Tags on create: CreateNetworkInterface with the
				// agent's tags answers both when it is allowed, in one
				// call. Only when it is refused is it asked without
				// tags, to tell which of the two is missing.
				if _, done := answers[action]; done {
					continue
				}
				tagged := t
				tagged.WithTags = true
				err := a.cloud.DryRun(ctx, "CreateNetworkInterface", tagged)
				switch {
				case err == nil:
					answers["CreateNetworkInterface"], answers["CreateTags"] = nil, nil
				case !cloud.IsUnauthorized(err):
					answers["CreateNetworkInterface"], answers["CreateTags"] = err, err
					unknown("CreateNetworkInterface", err)
				default:
					plain := a.cloud.DryRun(ctx, "CreateNetworkInterface", t)
					answers["CreateNetworkInterface"] = plain
					switch {
					case plain == nil:
						answers["CreateTags"] = err
					case cloud.IsUnauthorized(plain):
						// Create itself is refused: whether tags would be
						// is unknown, and matters only once it is not.
						answers["CreateTags"] = nil
					default:
						answers["CreateTags"] = nil
						unknown("CreateNetworkInterface", plain)
					}
				}
			case (action == "DetachNetworkInterface" || action == "ModifyNetworkInterfaceAttribute") && t.AttachmentID == "":
				// Both name an attachment, and only DescribeNetworkInterfaces
				// tells the primary ENI's.
				if _, done := answers[action]; done {
					continue
				}
				answers[action] = nil
				if cloud.IsUnauthorized(attachErr) {
					st.NotProbed = append(st.NotProbed, action)
				} else {
					unknown(action, fmt.Errorf("the primary ENI's attachment is unknown: %v", attachErr))
				}
			default:
				ask(action)
			}
		}
	}
	missing := map[string]*introspect.MissingPermission{}
	var off []string
	for _, need := range a.neededFeatures(self.InstanceType) {
		for _, action := range need.actions {
			err := answers[action]
			if err == nil || !cloud.IsUnauthorized(err) {
				continue
			}
			m := missing[action]
			if m == nil {
				m = &introspect.MissingPermission{Action: "ec2:" + action, Add: policyLine(action), Message: cloud.ErrorMessage(err)}
				missing[action] = m
			}
			m.Features = append(m.Features, need.feature)
			if !slices.Contains(off, need.feature) {
				off = append(off, need.feature)
			}
		}
	}
	for _, action := range slices.Sorted(maps.Keys(missing)) {
		st.Missing = append(st.Missing, *missing[action])
	}
	st.FeaturesOff = off
	return st
}

// notePreflight publishes a pass: /v1/status, the diagnostic condition,
// the log and, for a newly missing permission, a Node Event.
func (a *Agent) notePreflight(st introspect.IAMStatus) {
	a.pre.mu.Lock()
	before := a.pre.status
	a.pre.status = st
	a.pre.mu.Unlock()
	a.pre.once.Do(func() { close(a.pre.done) })
	if len(st.Missing) == 0 {
		msg := "every EC2 action the enabled features need is permitted (DryRun)"
		if st.Recorded {
			msg += fmt.Sprintf(", as this node's preflight of %s found (recorded; probed again after %s, or after a call refused as unauthorized)",
				st.Checked.UTC().Format(time.RFC3339), preflightValidity)
		}
		if len(st.Unknown) > 0 {
			msg = "not all known yet: " + strings.Join(st.Unknown, "; ")
		}
		a.diag.set(CondEC2Permissions, len(st.Unknown) == 0, msg)
		return
	}
	var parts []string
	for _, m := range st.Missing {
		parts = append(parts, fmt.Sprintf("%s (needed for %s)", m.Action, strings.Join(m.Features, ", ")))
	}
	summary := fmt.Sprintf("the node's IAM role may not call %s; running without %s: add to its policy %s",
		strings.Join(parts, ", "), strings.Join(st.FeaturesOff, ", "), addLines(st.Missing))
	a.diag.set(CondEC2Permissions, false, summary)
	known := map[string]bool{}
	for _, m := range before.Missing {
		known[m.Action] = true
	}
	fresh := false
	for _, m := range st.Missing {
		if !known[m.Action] {
			fresh = true
			a.log.Warn("missing EC2 permission: running without the features that need it",
				"action", m.Action, "features", m.Features, "add", m.Add, "ec2", m.Message)
		}
	}
	if fresh {
		a.kube.Record(Event{Warning: true, Reason: EventUnauthorized, Message: summary})
	}
}

func addLines(ms []introspect.MissingPermission) string {
	lines := make([]string, len(ms))
	for i, m := range ms {
		lines[i] = m.Add
	}
	return strings.Join(lines, "; ")
}
