// Package sim is vpcnet's local cloud: an in-memory EC2 region with one
// VPC that speaks the EC2 Query API (the protocol of the unmodified
// aws-sdk-go-v2 EC2 client) and IMDSv2, with AWS semantics rather than a
// happy path: per-instance-type ENI and address limits, the five reserved
// addresses of every subnet, real subnet exhaustion and /28 fragmentation,
// dual-stack and IPv6-only subnets with IPv6 addresses and /80 prefixes,
// ENI states that take time to change, IMDS lagging behind EC2, account-wide
// request token buckets, and injected faults.
//
// It is a library first. A test builds a Cloud from a Topology, serves
// EC2Handler and IMDSHandler on loopback (httptest), points the production
// client at them, and drives time with a ManualClock:
//
//	topo, _ := sim.ParseTopology(yamlBytes)
//	clock := sim.NewManualClock(start)
//	cloud, _ := sim.NewCloud(topo, sim.Options{Now: clock.Now, AfterFunc: clock.AfterFunc})
//	defer cloud.Close()
//	ec2srv := httptest.NewServer(cloud.EC2Handler())
//	imdssrv := httptest.NewServer(cloud.IMDSHandler("i-node1"))
//	cloud.SetFault("AttachNetworkInterface", sim.Fault{ErrorRate: 1, Code: "UnauthorizedOperation"})
//	clock.Advance(2 * time.Second) // pending attaches complete, events go out
//
// Subscribe streams the changes a network fabric must mirror (ENIs
// attached and detached, IPv4 and IPv6 addresses and prefixes assigned and
// unassigned).
// "vpcnetctl sim serve" runs the same Cloud as a process. README.md in this
// directory documents the topology file and every behaviour.
package sim
