// Package doctor names what is wrong with a vpcnet node and how to fix it.
//
// It is split the way the agent is: Gather reads the node's sources (the
// agent's introspection, the checkpoint file, the host's links, routes
// and nftables, the CNI configuration, IMDS, EC2 and the Kubernetes API)
// into Facts, each behind a small interface so tests use fakes; Diagnose
// is a pure function from Facts to Findings, so every finding is tested
// table-driven without a node. Nothing here changes the node: every EC2
// call is a Describe or a DryRun, every kernel call a dump, every file is
// only read.
package doctor
