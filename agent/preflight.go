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
}

func newPreflight() *preflight {
	return &preflight{done: make(chan struct{})}
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

// runPreflight probes until every action has an answer (allowed or
// denied), backing off while EC2 does not answer, then stops.
func (a *Agent) runPreflight(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		backoff := time.Second
		for {
			st := a.probe(ctx)
			a.notePreflight(st)
			if len(st.Unknown) == 0 {
				return
			}
			if !clock.Sleep(a.clk, backoff, ctx.Done()) {
				return
			}
			backoff = min(2*backoff, preflightMaxBackoff)
		}
	}()
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
		calls := []string{"DescribeNetworkInterfaces"}
		for _, need := range a.neededFeatures(self.InstanceType) {
			for _, action := range need.actions {
				if !slices.Contains(calls, action) && len(calls) < budgetapi.MaxNames {
					calls = append(calls, action)
				}
			}
		}
		if err := a.budget.Acquire(ctx, calls, func() bool { return false }); err != nil {
			unknown("DescribeNetworkInterfaces", err)
			return st
		}
	}
	// The primary ENI's attachment, which Detach and Modify name.
	var attachErr error
	if enis, err := a.cloud.DescribeENIs(ctx, self.Primary.ID); err != nil {
		attachErr = err
	} else if len(enis) == 1 && enis[0].Attachment != nil {
		t.AttachmentID = enis[0].Attachment.ID
	}
	for _, need := range a.neededFeatures(self.InstanceType) {
		for _, action := range need.actions {
			switch {
			case action == "CreateTags":
				// Tags on create: CreateNetworkInterface with the
				// agent's tags, once it is allowed without them.
				if answers["CreateNetworkInterface"] != nil {
					continue
				}
				if _, done := answers["CreateTags"]; done {
					continue
				}
				tagged := t
				tagged.WithTags = true
				err := a.cloud.DryRun(ctx, "CreateNetworkInterface", tagged)
				answers["CreateTags"] = err
				if err != nil && !cloud.IsUnauthorized(err) {
					unknown("CreateTags", err)
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
