package ipam

// PlanIPv6 is Plan for aws-node's IPv6 mode (ENABLE_IPv6=true): the
// node's pods take their addresses from one /80 prefix on the primary
// ENI, whose 2^48 addresses no node can use up. So there is no warm pool
// to keep: the one action is asking EC2 for that prefix while the
// primary ENI has none, once (an ENI holding one already, as after a
// restart, needs no call). Nothing is ever released or detached: a /80
// costs the subnet nothing another node could use (each /64 holds 2^16 of
// them), and giving it back while a pod holds an address from it would
// cut that pod off. aws-node's IPv6 mode does the same: no warm targets,
// no ENI attached for pods.
//
// WARM_* targets, MAX_ENI and max pods do not apply, as in aws-node.
func PlanIPv6(s Snapshot) []Action {
	for _, e := range s.ENIs {
		if !e.Primary {
			continue
		}
		for _, b := range e.Blocks {
			if b.Prefix.Addr().Is6() {
				return nil
			}
		}
		return []Action{{Kind: AssignBlocks, ENIID: e.ID, SubnetID: e.SubnetID, Count: 1, Prefixes: true, IPv6: true,
			Reason: "IPv6 mode (ENABLE_IPv6=true): pods take their addresses from one /80 prefix on the primary ENI, which has none"}}
	}
	return nil
}
