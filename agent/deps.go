package agent

import (
	"github.com/vpcnet/vpcnet/agent/executor"
	"github.com/vpcnet/vpcnet/agent/nodestate"
)

// The agent's dependencies are defined where they are consumed, in the
// executor; these names keep the agent's API as callers know it.
type (
	Cloud   = executor.Cloud
	Host    = executor.Host
	NodeNet = executor.NodeNet
	ENINet  = executor.ENINet
)

// NoAddressError says why a pod got no address; see nodestate.
type NoAddressError = nodestate.NoAddressError

// Reasons a pod can get no address (NoAddressError.Reason).
const (
	ReasonSubnetExhausted = nodestate.ReasonSubnetExhausted
	ReasonENILimit        = nodestate.ReasonENILimit
	ReasonMaxPods         = nodestate.ReasonMaxPods
	ReasonThrottled       = nodestate.ReasonThrottled
	ReasonUnauthorized    = nodestate.ReasonUnauthorized
	ReasonCooldown        = nodestate.ReasonCooldown
	ReasonEC2Error        = nodestate.ReasonEC2Error
	ReasonPending         = nodestate.ReasonPending
	ReasonENIConfig       = nodestate.ReasonENIConfig
	// ReasonCordoned: the node is cordoned and
	// AWS_MANAGE_ENIS_NON_SCHEDULABLE=false holds the pool.
	ReasonCordoned = nodestate.ReasonCordoned
	// ReasonSubnetFragmented: free addresses but no free /28 for a prefix.
	ReasonSubnetFragmented = nodestate.ReasonSubnetFragmented
)
