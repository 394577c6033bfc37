package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/vpcnet/vpcnet/agentapi"
)

// agent is vpcnetd's socket. Every call has the configured timeout.
type agent struct {
	api     *agentapi.Client
	socket  string
	timeout time.Duration
}

func newAgent(c *netConf) *agent {
	return &agent{api: &agentapi.Client{Socket: c.plugin.Socket}, socket: c.plugin.Socket, timeout: c.timeout}
}

func (a *agent) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.timeout)
}

// unreachable reports whether err means the agent never answered (not
// running, not listening, too slow), as opposed to an answer that says no.
func (a *agent) unreachable(err error) bool {
	e := agentapi.AsError(err)
	return e.Unreached || e.Code == agentapi.DeadlineExceeded
}

// cniError turns an agent call's error into the CNI error the runtime
// shows: what failed and, from the agent's own message, what to do.
func (a *agent) cniError(op string, err error) *types.Error {
	e := agentapi.AsError(err)
	msg := e.Message
	switch e.Code {
	case agentapi.DeadlineExceeded:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("vpcnetd did not answer %s within %s; it may be overloaded or stuck, see its log", op, a.timeout), "")
	case agentapi.Unavailable:
		if e.Unreached {
			return types.NewError(types.ErrTryAgainLater, a.unreachableMessage(op, msg), "")
		}
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("vpcnetd %s: %s", op, msg), "")
	case agentapi.ResourceExhausted:
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("vpcnetd %s: %s", op, msg), "")
	case agentapi.NotFound:
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("vpcnetd %s: %s", op, msg), "")
	case agentapi.InvalidArgument:
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("vpcnetd %s: %s", op, msg), "")
	}
	return types.NewError(types.ErrInternal, fmt.Sprintf("vpcnetd %s: %s", op, msg), "")
}

func (a *agent) unreachableMessage(op, detail string) string {
	if _, err := os.Stat(a.socket); errors.Is(err, os.ErrNotExist) {
		return fmt.Sprintf("vpcnetd %s: agent socket %s does not exist: is vpcnetd running on this node?", op, a.socket)
	}
	return fmt.Sprintf("vpcnetd %s: cannot reach the agent at %s (%s): is vpcnetd running on this node?", op, a.socket, detail)
}

func (c *netConf) attachment(containerID, ifName string) *agentapi.Attachment {
	return &agentapi.Attachment{Network: c.Name, ContainerId: containerID, IfName: ifName}
}
