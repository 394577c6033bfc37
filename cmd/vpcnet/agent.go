package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/vpcnet/vpcnet/agentapi"
)

// agent is a connection to vpcnetd. Every call has the configured timeout.
type agent struct {
	api     agentapi.AgentClient
	conn    *grpc.ClientConn
	socket  string
	timeout time.Duration
}

func dialAgent(c *netConf) (*agent, error) {
	conn, err := grpc.NewClient("unix://"+c.plugin.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("field socket: %q: %v", c.plugin.Socket, err), "")
	}
	return &agent{api: agentapi.NewAgentClient(conn), conn: conn, socket: c.plugin.Socket, timeout: c.timeout}, nil
}

func (a *agent) close() { _ = a.conn.Close() }

func (a *agent) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.timeout)
}

// unreachable reports whether err means the agent never answered (not
// running, not listening, too slow), as opposed to an answer that says no.
func (a *agent) unreachable(err error) bool {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return true
	case codes.Unavailable:
		return isTransportFailure(st.Message())
	}
	return false
}

func isTransportFailure(msg string) bool {
	return strings.Contains(msg, "connection error") || strings.Contains(msg, "transport") ||
		strings.Contains(msg, "dial unix") || strings.Contains(msg, "connection refused")
}

// cniError turns an agent call's error into the CNI error the runtime
// shows: what failed and, from the agent's own message, what to do.
func (a *agent) cniError(op string, err error) *types.Error {
	st, _ := status.FromError(err)
	msg := st.Message()
	switch st.Code() {
	case codes.DeadlineExceeded:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("vpcnetd did not answer %s within %s; it may be overloaded or stuck, see its log", op, a.timeout), "")
	case codes.Unavailable:
		if isTransportFailure(msg) {
			return types.NewError(types.ErrTryAgainLater, a.unreachableMessage(op, msg), "")
		}
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("vpcnetd %s: %s", op, msg), "")
	case codes.ResourceExhausted:
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("vpcnetd %s: %s", op, msg), "")
	case codes.NotFound:
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("vpcnetd %s: %s", op, msg), "")
	case codes.InvalidArgument:
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
