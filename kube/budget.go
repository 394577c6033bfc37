package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/budget/budgetapi"
)

// ErrNoBudgetLeader says the budget controller has no leader to ask: its
// Lease is missing, released or expired. The agent then calls EC2 on its
// own budget.
var ErrNoBudgetLeader = errors.New("no budget controller leader")

// budgetLease is the part of a coordination.k8s.io/v1 Lease the lookup
// reads: decoded from JSON here so that the agent links neither
// k8s.io/api/coordination/v1 nor a scheme with it.
type budgetLease struct {
	Spec struct {
		HolderIdentity       *string `json:"holderIdentity"`
		LeaseDurationSeconds *int32  `json:"leaseDurationSeconds"`
		RenewTime            *string `json:"renewTime"`
	} `json:"spec"`
}

// BudgetEndpoint finds the budget controller's leader: it reads the Lease
// namespace/name (GET /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME,
// as JSON) through rc, a REST client of any group (the path is absolute),
// and returns the "host:port" its holder serves on
// (budgetapi.HolderEndpoint). A Lease that is missing, has no holder, or
// was last renewed longer than its duration before now is no leader:
// the error wraps ErrNoBudgetLeader. now is the agent's clock; the
// holder's renewTime is the leader's, so clocks skewed by more than the
// lease duration (15 s) make the agent go alone, never ask a dead leader
// for long.
func BudgetEndpoint(ctx context.Context, rc rest.Interface, namespace, name string, now time.Time) (string, error) {
	ref := namespace + "/" + name
	res := rc.Get().
		AbsPath("/apis/coordination.k8s.io/v1", "namespaces", namespace, "leases", name).
		SetHeader("Accept", "application/json").
		Do(ctx)
	raw, err := res.Raw()
	if err != nil {
		err = res.Error() // the API server's Status, when it sent one
	}
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("%w: lease %s not found (is vpcnet-budget installed and running?)", ErrNoBudgetLeader, ref)
	case apierrors.IsForbidden(err):
		return "", fmt.Errorf("read lease %s: %w (grant get on leases named %s in %s: the Role vpcnet in deploy/vpcnet.yaml)", ref, err, name, namespace)
	case err != nil:
		return "", fmt.Errorf("read lease %s: %w", ref, err)
	}
	var l budgetLease
	if err := json.Unmarshal(raw, &l); err != nil {
		return "", fmt.Errorf("read lease %s: decode: %w", ref, err)
	}
	return leaseEndpoint(ref, l, now)
}

// leaseEndpoint checks that the Lease has a live holder and returns
// where it serves.
func leaseEndpoint(ref string, l budgetLease, now time.Time) (string, error) {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" {
		return "", fmt.Errorf("%w: lease %s has no holder (released)", ErrNoBudgetLeader, ref)
	}
	holder := *s.HolderIdentity
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil || *s.LeaseDurationSeconds <= 0 {
		return "", fmt.Errorf("%w: lease %s held by %q has no renew time or duration", ErrNoBudgetLeader, ref, holder)
	}
	renewed, err := time.Parse(time.RFC3339Nano, *s.RenewTime)
	if err != nil {
		return "", fmt.Errorf("lease %s: renewTime %q: %w", ref, *s.RenewTime, err)
	}
	expires := renewed.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)
	if !now.Before(expires) {
		return "", fmt.Errorf("%w: lease %s held by %q expired %s ago (renewed %s, lasts %ds)",
			ErrNoBudgetLeader, ref, holder, now.Sub(expires).Round(time.Second), renewed.UTC().Format(time.RFC3339), *s.LeaseDurationSeconds)
	}
	ep, err := budgetapi.HolderEndpoint(holder)
	if err != nil {
		return "", fmt.Errorf("lease %s: %w", ref, err)
	}
	return ep, nil
}

// BudgetEndpoint is BudgetEndpoint through the Client's own REST client
// and clock. It needs a Client built by NewForConfig.
func (c *Client) BudgetEndpoint(ctx context.Context, namespace, name string) (string, error) {
	rc, ok := c.cs.(*restCore)
	if !ok {
		return "", errors.New("kube: the budget lease lookup needs a Client built by NewForConfig")
	}
	return BudgetEndpoint(ctx, rc.rc, namespace, name, c.now())
}
