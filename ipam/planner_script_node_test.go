package ipam

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

func (n *scriptNode) setLimits(args map[string]string) error {
	for k, v := range args {
		i, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("limits %s=%q: %w", k, v, err)
		}
		switch k {
		case "enis":
			n.lim.MaxENIs = i
		case "ipv4":
			n.lim.IPv4PerENI = i
		default:
			return fmt.Errorf("unknown limit %q", k)
		}
	}
	return n.lim.Validate()
}

func (n *scriptNode) setConfig(args map[string]string) error {
	ints := map[string]*int{
		"warm-eni": &n.cfg.WarmENITarget, "warm-ip": &n.cfg.WarmIPTarget, "min-ip": &n.cfg.MinimumIPTarget,
		"warm-prefix": &n.cfg.WarmPrefixTarget, "max-eni": &n.cfg.MaxENI, "max-pods": &n.cfg.MaxPods,
	}
	for k, v := range args {
		var err error
		switch k {
		case "prefix":
			n.cfg.PrefixDelegation, err = strconv.ParseBool(v)
		case "custom":
			n.cfg.CustomNetworking, err = strconv.ParseBool(v)
		case "grace":
			n.cfg.ENIGracePeriod, err = time.ParseDuration(v)
		default:
			p, ok := ints[k]
			if !ok {
				return fmt.Errorf("unknown setting %q", k)
			}
			*p, err = strconv.Atoi(v)
		}
		if err != nil {
			return fmt.Errorf("config %s=%q: %w", k, v, err)
		}
	}
	return n.cfg.Validate()
}

// startPods starts k pods, then serves waiting ones, each on the first
// free address by device index; pods that find none wait.
func (n *scriptNode) startPods(k int) {
	n.snap.Waiting += k
	for i := range n.snap.ENIs {
		bl := n.snap.ENIs[i].Blocks
		for j := range bl {
			for n.snap.Waiting > 0 && bl[j].Free > 0 {
				bl[j].Free--
				bl[j].Assigned++
				n.snap.Waiting--
			}
		}
	}
}

// stopPods stops k pods, from the highest device index down; their
// addresses start cooling.
func (n *scriptNode) stopPods(k int) {
	for i := len(n.snap.ENIs) - 1; i >= 0; i-- {
		bl := n.snap.ENIs[i].Blocks
		for j := len(bl) - 1; j >= 0; j-- {
			for k > 0 && bl[j].Assigned > 0 {
				bl[j].Assigned--
				bl[j].Cooling++
				k--
			}
		}
	}
}

func (n *scriptNode) cooldown() {
	for i := range n.snap.ENIs {
		for j := range n.snap.ENIs[i].Blocks {
			b := &n.snap.ENIs[i].Blocks[j]
			b.Free += b.Cooling
			b.Cooling = 0
		}
	}
}

// state renders the node one ENI a line, then the pool's totals.
func (n *scriptNode) state() string {
	var b strings.Builder
	var tot [4]int
	for _, e := range n.snap.ENIs {
		var c [4]int // blocks, assigned, cooling, free
		for _, bl := range e.Blocks {
			c[0]++
			c[1] += bl.Assigned
			c[2] += bl.Cooling
			c[3] += bl.Free
		}
		kind := plural(c[0], "address", "addresses")
		if len(e.Blocks) > 0 && e.Blocks[0].Prefix.Bits() == 28 {
			kind = plural(c[0], "prefix", "prefixes")
		}
		age := "primary"
		if !e.Primary {
			age = "age " + n.now.Sub(e.CreatedAt).String()
		}
		fmt.Fprintf(&b, "%s dev %d %s: %s, %d assigned, %d cooling, %d free\n",
			e.ID, e.DeviceIndex, age, kind, c[1], c[2], c[3])
		for i := range tot {
			tot[i] += c[i]
		}
	}
	fmt.Fprintf(&b, "pool: %s on %s, %d assigned, %d cooling, %d available, %d waiting",
		plural(tot[1]+tot[2]+tot[3], "address", "addresses"), plural(len(n.snap.ENIs), "ENI", "ENIs"),
		tot[1], tot[2], tot[3], n.snap.Waiting)
	return b.String()
}
