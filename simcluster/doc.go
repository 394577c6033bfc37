// Package simcluster runs a cluster on the local cloud: the EC2 emulator,
// its network fabric, an unmodified vpcnetd in every node's namespace, and
// pods created through libcni, the library container runtimes use, exactly
// as containerd would on a node. The demo, `vpcnetctl sim`, the
// end-to-end tests and the benchmarks all drive it.
//
// A Cluster started here owns the emulator and the agents; Attach opens
// one another process started, to add and delete pods by hand.
package simcluster
