package sim

import (
	"encoding/xml"
	"fmt"
	"net/http"
)

// EC2 error codes the emulator returns.
const (
	codeAttachmentLimitExceeded     = "AttachmentLimitExceeded"
	codeCidrLimitExceeded           = "CidrLimitExceeded"
	codeDryRunOperation             = "DryRunOperation"
	codeIdempotentParameterMismatch = "IdempotentParameterMismatch"
	codeIncorrectInstanceState      = "IncorrectInstanceState"
	codeIncorrectState              = "IncorrectState"
	codeInsufficientCidrBlocks      = "InsufficientCidrBlocks"
	codeInsufficientFreeAddresses   = "InsufficientFreeAddressesInSubnet"
	codeInternalError               = "InternalError"
	codeInvalidAction               = "InvalidAction"
	codeInvalidAttachmentNotFound   = "InvalidAttachmentID.NotFound"
	codeInvalidGroupNotFound        = "InvalidGroup.NotFound"
	codeInvalidID                   = "InvalidID"
	codeInvalidIPAddressInUse       = "InvalidIPAddress.InUse"
	codeInvalidInstanceNotFound     = "InvalidInstanceID.NotFound"
	codeInvalidInstanceType         = "InvalidInstanceType"
	codeInvalidENINotFound          = "InvalidNetworkInterfaceID.NotFound"
	codeInvalidENIInUse             = "InvalidNetworkInterface.InUse"
	codeInvalidPaginationToken      = "InvalidPaginationToken"
	codeInvalidParameterCombination = "InvalidParameterCombination"
	codeInvalidParameterValue       = "InvalidParameterValue"
	codeInvalidSubnetNotFound       = "InvalidSubnetID.NotFound"
	codeInvalidSubnetRange          = "InvalidSubnet.Range"
	codeInvalidSubnetConflict       = "InvalidSubnet.Conflict"
	codeInvalidVPCNotFound          = "InvalidVpcID.NotFound"
	codeMissingParameter            = "MissingParameter"
	codeOperationNotPermitted       = "OperationNotPermitted"
	codePrivateIPLimitExceeded      = "PrivateIpAddressLimitExceeded"
	codeRequestLimitExceeded        = "RequestLimitExceeded"
	codeTagLimitExceeded            = "TagLimitExceeded"
	codeUnauthorizedOperation       = "UnauthorizedOperation"
)

// apiError is an EC2 error: a code a program matches on and a message a
// person reads.
type apiError struct {
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// status is the HTTP status EC2 sends with code: 5xx for its own
// failures and for throttling (the SDK retries RequestLimitExceeded by code
// either way), 403 for authorization, 412 for DryRun, 400 for the rest.
func status(code string) int {
	switch code {
	case codeInternalError, "InternalFailure":
		return http.StatusInternalServerError
	case codeRequestLimitExceeded, "Unavailable", "ServiceUnavailable", "InsufficientInstanceCapacity":
		return http.StatusServiceUnavailable
	case codeUnauthorizedOperation, "AuthFailure", "Blocked", "OptInRequired":
		return http.StatusForbidden
	case codeDryRunOperation:
		return http.StatusPreconditionFailed
	default:
		return http.StatusBadRequest
	}
}

// defaultMessage is what EC2 says for codes injected without context.
func defaultMessage(code string) string {
	switch code {
	case codeInternalError:
		return "An internal error has occurred"
	case codeRequestLimitExceeded:
		return "Request limit exceeded."
	case codeUnauthorizedOperation:
		return "You are not authorized to perform this operation."
	case codeDryRunOperation:
		return "Request would have succeeded, but DryRun flag is set."
	default:
		return "Injected fault: " + code
	}
}

type xmlErrorResponse struct {
	XMLName   xml.Name     `xml:"Response"`
	Errors    []xmlErrItem `xml:"Errors>Error"`
	RequestID string       `xml:"RequestID"`
}

type xmlErrItem struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func writeError(w http.ResponseWriter, e *apiError, requestID string) {
	body, err := xml.Marshal(xmlErrorResponse{Errors: []xmlErrItem{{e.Code, e.Message}}, RequestID: requestID})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status(e.Code))
	w.Write([]byte(xml.Header))
	w.Write(body)
}
