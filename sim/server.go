package sim

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"net/http"
	"time"
)

// ec2Namespace is the XML namespace of API version 2016-11-15, the one
// every current SDK speaks.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// request is one EC2 Query API call.
type request struct {
	ctx    context.Context
	action string
	params fields
	id     string
}

type actionFunc func(c *Cloud, r *request) (any, error)

// lookupAction maps an Action parameter to its implementation.
func lookupAction(name string) actionFunc {
	switch name {
	case "DescribeInstances":
		return (*Cloud).describeInstances
	case "DescribeInstanceTypes":
		return (*Cloud).describeInstanceTypes
	case "DescribeSubnets":
		return (*Cloud).describeSubnets
	case "DescribeNetworkInterfaces":
		return (*Cloud).describeNetworkInterfaces
	case "CreateNetworkInterface":
		return (*Cloud).createNetworkInterface
	case "DeleteNetworkInterface":
		return (*Cloud).deleteNetworkInterface
	case "AttachNetworkInterface":
		return (*Cloud).attachNetworkInterface
	case "DetachNetworkInterface":
		return (*Cloud).detachNetworkInterface
	case "ModifyNetworkInterfaceAttribute":
		return (*Cloud).modifyNetworkInterfaceAttribute
	case "AssignPrivateIpAddresses":
		return (*Cloud).assignPrivateIPAddresses
	case "UnassignPrivateIpAddresses":
		return (*Cloud).unassignPrivateIPAddresses
	case "AssignIpv6Addresses":
		return (*Cloud).assignIPv6Addresses
	case "UnassignIpv6Addresses":
		return (*Cloud).unassignIPv6Addresses
	case "AssociateVpcCidrBlock":
		return (*Cloud).associateVPCCIDRBlock
	case "AssociateSubnetCidrBlock":
		return (*Cloud).associateSubnetCIDRBlock
	case "DescribeVpcs":
		return (*Cloud).describeVPCs
	case "CreateTags":
		return (*Cloud).createTags
	case "DeleteTags":
		return (*Cloud).deleteTags
	case "TerminateInstances":
		return (*Cloud).terminateInstances
	}
	return nil
}

// EC2Handler serves the EC2 Query API (form-encoded POST with Action and
// Version=2016-11-15) at any path. Requests are not signature-checked:
// any credentials work. Each request passes the action's token bucket,
// then its injected fault, then runs.
func (c *Cloud) EC2Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) { c.serveEC2(w, hr, "") })
}

// serveEC2 serves one request; from is the instance whose endpoint it came
// through, if any.
func (c *Cloud) serveEC2(w http.ResponseWriter, hr *http.Request, from string) {
	start := time.Now()
	reqID := c.ids.requestID()
	action, code := "", ""
	defer func() {
		c.log.Debug("ec2 request", "action", action, "code", code, "request_id", reqID, "elapsed", time.Since(start))
	}()
	fail := func(e *apiError) {
		code = e.Code
		writeError(w, e, reqID)
	}
	if hr.Method != http.MethodPost && hr.Method != http.MethodGet {
		fail(errorf("InvalidHttpRequest", "The EC2 Query API takes POST (or GET), not %s", hr.Method))
		return
	}
	if err := hr.ParseForm(); err != nil {
		fail(errorf("MalformedQueryString", "%v", err))
		return
	}
	action = hr.Form.Get("Action")
	if action == "" {
		fail(errorf("MissingAction", "The request must contain the parameter Action"))
		return
	}
	fn := lookupAction(action)
	if fn == nil {
		fail(errorf(codeInvalidAction, "The action %s is not valid for this web service.", action))
		return
	}
	caller := callerInstance(hr)
	if caller == "" {
		caller = from
	}
	if dry, _, _ := (fields{v: hr.Form}).boolOpt("DryRun"); dry {
		c.tally.add(caller, action+DryRunSuffix)
	} else {
		c.tally.add(caller, action)
	}
	if !c.throttleNow().allow(action, c.now()) {
		fail(errorf(codeRequestLimitExceeded, "%s", defaultMessage(codeRequestLimitExceeded)))
		return
	}
	latency, injected := c.faults.draw(action)
	if latency > 0 {
		if err := c.sleep(hr.Context(), latency); err != nil {
			return // the client has gone
		}
	}
	if injected != "" {
		fail(errorf(injected, "%s", defaultMessage(injected)))
		return
	}
	r := &request{ctx: hr.Context(), action: action, params: fields{v: hr.Form}, id: reqID}
	if denied := c.authorize(hr, action, r.params); denied != nil {
		fail(denied)
		return
	}
	if dry, _, _ := r.params.boolOpt("DryRun"); dry {
		fail(errorf(codeDryRunOperation, "%s", defaultMessage(codeDryRunOperation)))
		return
	}
	body, err := fn(c, r)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			c.log.Error("ec2 action failed", "action", action, "err", err)
			ae = errorf(codeInternalError, "%s: %v", defaultMessage(codeInternalError), err)
		}
		fail(ae)
		return
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	root := xml.StartElement{
		Name: xml.Name{Local: action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}},
	}
	if err := xml.NewEncoder(&buf).EncodeElement(body, root); err != nil {
		c.log.Error("ec2 response encoding failed", "action", action, "err", err)
		fail(errorf(codeInternalError, "%s", defaultMessage(codeInternalError)))
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Write(buf.Bytes())
}

// returnResponse is the body of actions that answer only "it worked".
type returnResponse struct {
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

func ok(r *request) *returnResponse { return &returnResponse{RequestID: r.id, Return: true} }
