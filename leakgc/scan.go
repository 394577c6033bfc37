package leakgc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/cloud"
)

// Result counts what one scan found and did. Every ENI counted in Seen is
// counted again in exactly one of Deleted, Gone, SkippedYoung,
// SkippedUntagged, SkippedInUse, Deferred and Errors.
type Result struct {
	// Seen is the available, unattached ENIs of ours the listing
	// returned, of any age.
	Seen int
	// Deleted is the leaked ENIs this scan deleted.
	Deleted int
	// Gone is the leaked ENIs someone else (another node's collector)
	// deleted between the listing and our delete.
	Gone int
	// SkippedYoung is the ENIs created within the grace period.
	SkippedYoung int
	// SkippedUntagged is the ENIs without a readable created-at tag: of
	// unknown age, so left alone.
	SkippedUntagged int
	// SkippedInUse is the ENIs attached between the listing and the
	// delete; EC2 refused the delete and the collector does not force.
	SkippedInUse int
	// Deferred is the leaked ENIs left for a later scan: past MaxPerScan,
	// or not reached before the context ended.
	Deferred int
	// Errors is the deletes that failed for any other reason.
	Errors int
	// Refused is the ENIs the listing returned that the collector's own
	// check refused: attached, not available, or not carrying our tag.
	// The listing's filter should keep this at zero.
	Refused int
}

// leak is an ENI past its grace, to be deleted.
type leak struct {
	eni       cloud.ENI
	createdAt time.Time
	age       time.Duration
}

// Scan lists the available ENIs of ours, deletes those older than the
// grace period (at most MaxPerScan, at the delete rate) and says what it
// did. The error is non-nil when the listing failed, when ctx ended before
// the scan was done, or when a delete failed; the Result counts what was
// done anyway.
func (c *Collector) Scan(ctx context.Context) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	enis, err := c.cloud.ListENIs(ctx, c.filter())
	if err != nil {
		if ctx.Err() == nil {
			c.metrics.scanErrors.WithLabelValues(opList).Inc()
		}
		return Result{}, fmt.Errorf("leaked ENI scan: %w", err)
	}
	now := c.clk.Now()
	res, leaked := c.sort(enis, now)
	c.metrics.seen.Set(float64(res.Seen))
	c.metrics.lastScan.Set(float64(now.UnixNano()) / 1e9)

	// Nodes scanning at the same time then mostly pick different ENIs
	// instead of racing to delete the same first few.
	c.rng.Shuffle(len(leaked), func(i, j int) { leaked[i], leaked[j] = leaked[j], leaked[i] })
	var errs []error
	for i, l := range leaked {
		if i == c.maxPerScan {
			res.Deferred += len(leaked) - i
			break
		}
		if err := c.limiter.Wait(ctx); err != nil {
			res.Deferred += len(leaked) - i
			errs = append(errs, fmt.Errorf("stopped with %d leaked ENIs left: %w", len(leaked)-i, err))
			break
		}
		err := c.cloud.DeleteENI(ctx, l.eni.ID)
		if err != nil && ctx.Err() != nil {
			// The delete's outcome is unknown; the next scan will see.
			res.Deferred += len(leaked) - i
			errs = append(errs, fmt.Errorf("stopped with %d leaked ENIs left: %w", len(leaked)-i, ctx.Err()))
			break
		}
		if err := c.settle(l, err, &res); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("leaked ENI scan: %w", err)
	}
	return res, nil
}

// filter asks EC2 for available ENIs carrying our tag: the cluster's, or
// without a cluster name this instance's only.
func (c *Collector) filter() cloud.ENIFilter {
	if c.clusterName != "" {
		return cloud.ENIFilter{Status: cloud.StatusAvailable, Tags: map[string]string{cloud.TagClusterName: c.clusterName}}
	}
	return cloud.ENIFilter{Status: cloud.StatusAvailable, Tags: map[string]string{cloud.TagInstanceID: c.instanceID}}
}

// sort counts the listed ENIs and returns those past their grace. It
// reports each ENI with an unreadable created-at tag once: in the first
// scan that sees it.
func (c *Collector) sort(enis []cloud.ENI, now time.Time) (Result, []leak) {
	var res Result
	var leaked []leak
	unreadable := map[string]bool{}
	for _, e := range enis {
		if why := c.refuse(e); why != "" {
			res.Refused++
			c.log.Warn("EC2 listed an ENI that is not an available ENI of ours; leaving it alone", "eni", e.ID, "why", why)
			continue
		}
		res.Seen++
		created, err := createdAt(e, now)
		if err != nil {
			res.SkippedUntagged++
			unreadable[e.ID] = true
			if !c.unreadable[e.ID] {
				c.log.Warn("available ENI of ours is of unknown age; leaving it alone (reported once)",
					"eni", e.ID, "subnet", e.SubnetID, "created_by", e.Tags[cloud.TagInstanceID], "error", err,
					"fix", "if it is a leak delete it by hand, or tag it "+cloud.TagCreatedAt+"=<RFC3339 time> to let the collector take it")
			}
			continue
		}
		age := now.Sub(created)
		if age <= c.grace {
			res.SkippedYoung++
			continue
		}
		leaked = append(leaked, leak{eni: e, createdAt: created, age: age})
	}
	// Only ENIs still there stay remembered, so the set never outgrows
	// the current leaks.
	c.unreadable = unreadable
	return res, leaked
}

// refuse says why e must not be deleted whatever its age, or "" when it
// is an available, unattached ENI of ours. The listing's filter already
// asks for exactly that; this is the second lock on the door.
func (c *Collector) refuse(e cloud.ENI) string {
	switch {
	case e.Status != cloud.StatusAvailable:
		return fmt.Sprintf("status is %q, not %q", e.Status, cloud.StatusAvailable)
	case e.Attachment != nil:
		return fmt.Sprintf("attached to %s", e.Attachment.InstanceID)
	case c.clusterName != "" && e.Tags[cloud.TagClusterName] != c.clusterName:
		return fmt.Sprintf("tag %s is %q, not %q", cloud.TagClusterName, e.Tags[cloud.TagClusterName], c.clusterName)
	case c.clusterName == "" && e.Tags[cloud.TagInstanceID] != c.instanceID:
		return fmt.Sprintf("tag %s is %q, not this instance %q", cloud.TagInstanceID, e.Tags[cloud.TagInstanceID], c.instanceID)
	}
	return ""
}

// maxClockSkew is how far ahead of this node's clock a created-at tag may
// be and still count as a young ENI: the creating node's clock may run
// ahead of ours, but not by a day. Further ahead the tag is corrupt, and
// counting the ENI young would hide the leak at every scan, forever.
const maxClockSkew = 24 * time.Hour

// createdAt reads e's created-at tag, refusing a time more than
// maxClockSkew after now.
func createdAt(e cloud.ENI, now time.Time) (time.Time, error) {
	v, ok := e.Tags[cloud.TagCreatedAt]
	if !ok {
		return time.Time{}, fmt.Errorf("no %s tag", cloud.TagCreatedAt)
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("tag %s=%s is not an RFC3339 time", cloud.TagCreatedAt, quoteShort(v))
	}
	if ahead := t.Sub(now); ahead > maxClockSkew {
		return time.Time{}, fmt.Errorf("tag %s=%s is %s ahead of this node's clock, more than any clock skew (%s)",
			cloud.TagCreatedAt, quoteShort(v), ahead.Round(time.Second), maxClockSkew)
	}
	return t, nil
}

// quoteShort quotes a tag value for a log line, at most 64 bytes of it.
func quoteShort(s string) string {
	const maxQuoted = 64
	if len(s) <= maxQuoted {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:maxQuoted], len(s))
}

// settle counts and logs the outcome of deleting l, returning the error
// worth reporting, if any.
func (c *Collector) settle(l leak, err error, res *Result) error {
	e := l.eni
	switch {
	case err == nil:
		res.Deleted++
		c.metrics.collected.Inc()
		c.log.Info("deleted leaked ENI", "eni", e.ID, "subnet", e.SubnetID,
			"age", l.age.Round(time.Second).String(), "created_at", l.createdAt.UTC().Format(time.RFC3339),
			"created_by", e.Tags[cloud.TagInstanceID], "addresses", 1+len(e.SecondaryIPs), "prefixes", len(e.Prefixes),
			"reason", c.reason(e))
		if c.onCollected != nil {
			c.onCollected(e)
		}
		return nil
	case cloud.IsNotFound(err):
		res.Gone++
		c.log.Info("leaked ENI already deleted by someone else", "eni", e.ID, "subnet", e.SubnetID)
		return nil
	case isInUse(err):
		res.SkippedInUse++
		c.log.Info("leaked ENI was attached since the scan listed it; leaving it alone", "eni", e.ID, "subnet", e.SubnetID)
		return nil
	}
	res.Errors++
	c.metrics.scanErrors.WithLabelValues(opDelete).Inc()
	c.log.Warn("could not delete leaked ENI; the next scan retries", "eni", e.ID, "subnet", e.SubnetID, "error", err)
	return fmt.Errorf("leaked ENI %s in %s: %w", e.ID, e.SubnetID, err)
}

func (c *Collector) reason(e cloud.ENI) string {
	by := e.Tags[cloud.TagInstanceID]
	switch {
	case by != "" && by == c.instanceID:
		return "created by this instance and left available past the grace period"
	case c.clusterName != "":
		return "created by another instance of cluster " + c.clusterName + " and left available past the grace period: that instance died or failed to clean up"
	}
	return "left available past the grace period"
}

// isInUse reports EC2 refusing to delete an attached ENI: the
// InvalidParameterValue "Network interface '...' is currently in use" that
// DeleteNetworkInterface gives, or InvalidNetworkInterface.InUse.
func isInUse(err error) bool {
	switch cloud.ErrorCode(err) {
	case "InvalidNetworkInterface.InUse":
		return true
	case "InvalidParameterValue":
		var api smithy.APIError
		return errors.As(err, &api) && strings.Contains(api.ErrorMessage(), "in use")
	}
	return false
}
