package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/limits"
)

// policy is one set of warm-pool settings, as an operator writes them.
type policy struct {
	name string
	set  func(*ipam.PlanConfig)
}

var idlePolicies = []policy{
	{"WARM_ENI_TARGET=1 (default; also the Amazon VPC CNI's)", func(*ipam.PlanConfig) {}},
	{"WARM_IP_TARGET=5", func(c *ipam.PlanConfig) { c.WarmIPTarget = 5 }},
	{"MINIMUM_IP_TARGET=20, WARM_IP_TARGET=2", func(c *ipam.PlanConfig) { c.MinimumIPTarget, c.WarmIPTarget = 20, 2 }},
	{"ENABLE_PREFIX_DELEGATION, WARM_PREFIX_TARGET=1", func(c *ipam.PlanConfig) { c.PrefixDelegation = true }},
}

var (
	idleTypes = []string{"m5.large", "m5.4xlarge"}
	idlePods  = []int{0, 10, 50, 100}
)

// rest is where a node's pool comes to rest for a number of pods.
type rest struct {
	pods      int // pods placed; fewer than asked when a limit stops growth
	addresses int // pod addresses held, in use or idle
	enis      int
	calls     int    // mutating EC2 calls from a fresh node to here
	limit     string // what stopped growth short of every pod, if anything
}

// restingPool runs the planner against the real pool until it asks for
// nothing more: a fresh node (its primary ENI, no secondary addresses)
// receives pods, every planned action succeeds at once, and time moves
// past the ENI grace period between passes so surplus can go.
func restingPool(cfg ipam.PlanConfig, lim ipam.Limits, pods int) (rest, error) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pool := ipam.NewPool(0)
	err := pool.AddENI(ipam.ENI{ID: "eni-0", DeviceIndex: 0, Primary: true, SubnetID: cfg.SubnetID,
		SubnetCIDR: netip.MustParsePrefix("10.0.0.0/16"), PrimaryIP: netip.MustParseAddr("10.0.0.10"), CreatedAt: now})
	if err != nil {
		return rest{}, err
	}
	var r rest
	for range 100 {
		for r.pods < pods {
			key := ipam.Key{Network: "bench", ContainerID: fmt.Sprintf("pod-%d", r.pods), IfName: "eth0"}
			if _, err := pool.Assign(key, ipam.Pod{Namespace: "default", Name: key.ContainerID}, now); err != nil {
				break
			}
			r.pods++
		}
		snap := pool.Snapshot(now)
		snap.Waiting = pods - r.pods
		actions, short := ipam.Plan(snap, cfg, lim, now)
		if len(actions) == 0 {
			if short.Short() {
				r.limit = short.String()
			}
			st := pool.Stats(now)
			r.addresses, r.enis = st.Total, len(st.ENIs)
			return r, nil
		}
		next, err := ipam.ApplyActions(snap, actions, lim, now)
		if err != nil {
			return rest{}, err
		}
		if err := syncPool(pool, snap, next, now); err != nil {
			return rest{}, err
		}
		r.calls += ec2Calls(actions)
		now = now.Add(cfg.ENIGracePeriod + time.Second)
	}
	return rest{}, fmt.Errorf("the planner did not settle in 100 passes (%d pods, %+v)", pods, cfg)
}

// syncPool makes the pool hold what next holds, as the agent does after
// EC2 answers.
func syncPool(pool *ipam.Pool, prev, next ipam.Snapshot, now time.Time) error {
	had := map[string]map[netip.Prefix]bool{}
	for _, e := range prev.ENIs {
		had[e.ID] = map[netip.Prefix]bool{}
		for _, b := range e.Blocks {
			had[e.ID][b.Prefix] = true
		}
	}
	for _, e := range next.ENIs {
		blocks, ok := had[e.ID]
		if !ok {
			if err := pool.AddENI(e.ENI); err != nil {
				return err
			}
		}
		for _, b := range e.Blocks {
			if !blocks[b.Prefix] {
				if err := pool.AddBlock(e.ID, b.Prefix); err != nil {
					return err
				}
			}
			delete(blocks, b.Prefix)
		}
		for p := range blocks {
			if err := pool.RemoveBlock(p, now); err != nil {
				return err
			}
		}
		delete(had, e.ID)
	}
	for id := range had {
		if err := pool.RemoveENI(id, now); err != nil {
			return err
		}
	}
	return nil
}

// ec2Calls is what the agent calls EC2 for to perform actions: attaching
// is Create, Attach and ModifyNetworkInterfaceAttribute (delete on
// termination); detaching is Detach and Delete.
func ec2Calls(actions []ipam.Action) int {
	n := 0
	for _, a := range actions {
		switch a.Kind {
		case ipam.AttachENI:
			n += 3
		case ipam.DetachENI:
			n += 2
		default:
			n++
		}
	}
	return n
}

// idle is scenario 4: addresses a node holds at rest, for pod counts,
// instance types and policies; pure computation with the planner.
func (b *bench) idle(ctx context.Context, res *Result) error {
	header := []string{"instance", "pods"}
	for _, p := range idlePolicies {
		header = append(header, p.name)
	}
	held := Table{Title: "Idle addresses: pod addresses held at rest (ENIs attached) by policy", Header: header}
	calls := Table{Title: "Mutating EC2 calls from a fresh node to that rest", Header: header}
	for _, typ := range idleTypes {
		l, ok := limits.Lookup(typ)
		if !ok {
			return fmt.Errorf("instance type %s is not in the limits table", typ)
		}
		lim := ipam.Limits{MaxENIs: l.MaxENIs, IPv4PerENI: l.IPv4PerENI}
		for _, pods := range idlePods {
			hrow := []string{typ, fmt.Sprint(pods)}
			crow := []string{typ, fmt.Sprint(pods)}
			if max := limits.MaxPods(l); pods > max {
				for range idlePolicies {
					hrow = append(hrow, fmt.Sprintf("over max pods (%d)", max))
					crow = append(crow, "")
				}
				held.AddRow(hrow...)
				calls.AddRow(crow...)
				continue
			}
			for _, pol := range idlePolicies {
				cfg := ipam.DefaultPlanConfig()
				cfg.SubnetID = "subnet-a"
				pol.set(&cfg)
				r, err := restingPool(cfg, lim, pods)
				if err != nil {
					return fmt.Errorf("%s, %d pods, %s: %w", typ, pods, pol.name, err)
				}
				cell := fmt.Sprintf("%d (%d)", r.addresses, r.enis)
				if r.pods < pods {
					cell = fmt.Sprintf("only %d pods fit: %d (%d)", r.pods, r.addresses, r.enis)
				}
				hrow = append(hrow, cell)
				crow = append(crow, fmt.Sprint(r.calls))
				res.figure(fmt.Sprintf("idle/%s/%d/%s", typ, pods, pol.name), float64(r.addresses-r.pods))
			}
			held.AddRow(hrow...)
			calls.AddRow(crow...)
		}
	}
	held.Notes = append(held.Notes,
		"computed with ipam.Plan and the real pool, iterated to a fixed point from a fresh node whose pods all arrive at once; every EC2 call succeeds at once",
		"vpcnet's defaults are the Amazon VPC CNI's on purpose (a node switches over without retuning), so the default column is also what aws-node holds; with prefix delegation a /28 counts as 16 addresses",
		"max pods is the Amazon VPC CNI's formula, ENIs × (addresses per ENI − 1) + 2, which the planner also uses to cap growth (vpcnet sets no other); \"only N pods fit\" means a limit stopped growth first")
	res.Tables = append(res.Tables, held, calls)
	return ctx.Err()
}
