package agentapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"
)

// maxMessage bounds what either side reads of one message. A GC request
// lists every attachment of a node (hundreds, about 100 bytes each).
const maxMessage = 4 << 20

// request and response are the wire's envelopes.
type request struct {
	Method string          `json:"method"`
	Body   json.RawMessage `json:"body,omitempty"`
}

type response struct {
	Body  json.RawMessage `json:"body,omitempty"`
	Error *Error          `json:"error,omitempty"`
}

// Client calls the agent at Socket, one connection per call.
type Client struct {
	Socket string
}

// Add assigns an address to an attachment.
func (c *Client) Add(ctx context.Context, req *AddRequest) (*AddReply, error) {
	out := &AddReply{}
	return out, c.call(ctx, MethodAdd, req, out)
}

// Del releases an attachment's address.
func (c *Client) Del(ctx context.Context, req *DelRequest) (*DelReply, error) {
	out := &DelReply{}
	return out, c.call(ctx, MethodDel, req, out)
}

// Check returns an attachment's assignment.
func (c *Client) Check(ctx context.Context, req *CheckRequest) (*AddReply, error) {
	out := &AddReply{}
	return out, c.call(ctx, MethodCheck, req, out)
}

// Status reports the agent's readiness.
func (c *Client) Status(ctx context.Context, req *StatusRequest) (*StatusReply, error) {
	out := &StatusReply{}
	return out, c.call(ctx, MethodStatus, req, out)
}

// GC releases the network's attachments that are not in req.Valid.
func (c *Client) GC(ctx context.Context, req *GCRequest) (*GCReply, error) {
	out := &GCReply{}
	return out, c.call(ctx, MethodGC, req, out)
}

// call sends one request and reads its answer. When ctx ends the
// connection's deadline is moved to the past, which ends any read or write
// in progress; closing the connection tells the server to stop.
func (c *Client) call(ctx context.Context, method string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return Errorf(InvalidArgument, "encode %s request: %v", method, err)
	}
	msg, err := json.Marshal(request{Method: method, Body: body})
	if err != nil {
		return Errorf(InvalidArgument, "encode %s request: %v", method, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return c.unreached(ctx, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(append(msg, '\n')); err != nil {
		return c.unreached(ctx, err)
	}
	var resp response
	if err := json.NewDecoder(io.LimitReader(conn, maxMessage)).Decode(&resp); err != nil {
		return c.unreached(ctx, err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return Errorf(Internal, "decode the agent's %s reply: %v", method, err)
	}
	return nil
}

// unreached is the error of a call that got no answer.
func (c *Client) unreached(ctx context.Context, err error) *Error {
	if ctx.Err() != nil {
		return &Error{Code: DeadlineExceeded, Message: fmt.Sprintf("no answer from %s: %v", c.Socket, ctx.Err()), Unreached: true}
	}
	return &Error{Code: Unavailable, Message: err.Error(), Unreached: true}
}
