package doctor

import (
	"fmt"
	"strings"
)

// capacityFindings: story 3. What ran out, where, with the numbers.
func capacityFindings(f Facts) []Finding {
	var out []Finding
	var st = struct {
		waiting   int
		shortfall string
		ec2Err    string
	}{}
	if f.Agent != nil {
		st.waiting, st.shortfall, st.ec2Err = f.Agent.Status.Waiting, f.Agent.Status.Shortfall, f.Agent.Status.LastEC2Error
	}
	// Short of the warm target with addresses still free is a warning;
	// with pods waiting, or none free for the next pod, an error.
	sev := Warning
	if st.waiting > 0 || (f.Agent != nil && f.Agent.Status.Addresses.Free == 0) {
		sev = Error
	}
	counts := ""
	if f.Agent != nil {
		a := f.Agent.Status.Addresses
		counts = fmt.Sprintf("pool: %d addresses, %d assigned, %d cooling, %d free; %d ADDs waiting", a.Total, a.Assigned, a.Cooling, a.Free, st.waiting)
	}
	prefixes := strings.EqualFold(f.setting("ENABLE_PREFIX_DELEGATION"), "true")
	if f.EC2 != nil {
		for _, s := range f.EC2.Subnets {
			ev := []string{fmt.Sprintf("subnet %s (%s): %d free addresses in EC2", s.ID, s.CIDR, s.Available)}
			if st.ec2Err != "" {
				ev = append(ev, "last EC2 error: "+st.ec2Err)
			}
			if counts != "" {
				ev = append(ev, counts)
			}
			switch {
			// EC2's count can show a few addresses that no request fits
			// (an ENI needs one per address asked for): its refusal wins.
			case s.Available == 0 || (strings.Contains(st.ec2Err, "InsufficientFreeAddressesInSubnet") && strings.Contains(st.ec2Err, s.ID)):
				out = append(out, Finding{
					ID: "subnet-exhausted", Severity: Error,
					What:     fmt.Sprintf("subnet %s has no free address, so this node cannot grow its pool and new pods wait", s.ID),
					Evidence: ev,
					Fix:      "add capacity: a larger subnet or an additional one through custom networking (ENIConfig), delete leaked ENIs (see leaked-enis), or lower WARM_IP_TARGET/WARM_ENI_TARGET on the nodes sharing it",
				})
			case prefixes && strings.Contains(st.ec2Err, "InsufficientCidrBlocks"):
				out = append(out, Finding{
					ID: "subnet-fragmented", Severity: Error,
					What:     fmt.Sprintf("subnet %s has %d free addresses but no free aligned /28 for a prefix: it is fragmented", s.ID, s.Available),
					Evidence: ev,
					Fix:      "reserve whole /28s for prefixes with an EC2 subnet CIDR reservation (aws ec2 create-subnet-cidr-reservation --reservation-type prefix), or use a new subnet for pods",
				})
			}
		}
	}
	if f.Agent == nil {
		return out
	}
	s := f.Agent.Status
	switch {
	case strings.Contains(st.shortfall, "max pods"):
		out = append(out, Finding{
			ID: "max-pods-reached", Severity: sev,
			What:     "the node holds as many addresses as its max pods can use, so the pool does not grow further",
			Evidence: []string{"shortfall: " + st.shortfall, counts},
			Fix:      "the scheduler should stop placing pods here at max pods; if pods still land and wait, check kubelet's --max-pods against the agent's MAX_PODS-based limit, or use a larger instance type",
		})
	case strings.Contains(st.shortfall, "ENIs") || strings.Contains(st.ec2Err, "AttachmentLimitExceeded"):
		ev := []string{fmt.Sprintf("instance type %s: at most %d ENIs of %d addresses", s.InstanceType, s.MaxENIs, s.IPv4PerENI), counts}
		if f.EC2 != nil {
			ev = append(ev, fmt.Sprintf("ENIs attached in EC2: %d", attached(f.EC2.ENIs)))
		}
		if st.shortfall != "" {
			ev = append(ev, "shortfall: "+st.shortfall)
		}
		if st.ec2Err != "" {
			ev = append(ev, "last EC2 error: "+st.ec2Err)
		}
		out = append(out, Finding{
			ID: "eni-limit-reached", Severity: sev,
			What:     fmt.Sprintf("every ENI the instance may attach (%d) is attached and full, so new pods wait", s.MaxENIs),
			Evidence: ev,
			Fix:      "use a larger instance type, enable prefix delegation (ENABLE_PREFIX_DELEGATION=true, Nitro only), raise MAX_ENI if set, or lower max pods so the scheduler stops earlier",
		})
	}
	return out
}

func attached(enis []ENIFact) int {
	n := 0
	for _, e := range enis {
		if e.DeviceIndex >= 0 {
			n++
		}
	}
	return n
}

// coolingFindings: story 8. A freed address waits out its cooldown; when
// every address not in use is cooling, the next pod waits too.
func coolingFindings(f Facts) []Finding {
	if f.Agent == nil {
		return nil
	}
	s := f.Agent.Status
	a := s.Addresses
	if a.Free > 0 || a.Cooling == 0 || s.NextFree == nil {
		return nil
	}
	sev := Warning
	if s.Waiting > 0 {
		sev = Error
	}
	in := s.NextFree.Sub(f.Now).Round(100 * 1e6)
	return []Finding{{
		ID: "addresses-cooling", Severity: sev,
		What: fmt.Sprintf("every address not held by a pod is cooling down after release; the first comes free at %s (in %s)",
			s.NextFree.UTC().Format("15:04:05Z"), in),
		Evidence: []string{fmt.Sprintf("pool: %d addresses, %d assigned, %d cooling, %d free; %d ADDs waiting", a.Total, a.Assigned, a.Cooling, a.Free, s.Waiting),
			"IP_COOLDOWN_PERIOD=" + orDash(f.setting("IP_COOLDOWN_PERIOD"))},
		Fix: "pods retry and get an address once it is free; if pods churn faster than the cooldown, raise WARM_IP_TARGET or MINIMUM_IP_TARGET so the pool keeps addresses beyond the churn (lowering IP_COOLDOWN_PERIOD risks misdelivered traffic)",
	}}
}
