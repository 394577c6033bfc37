package agentapi

import (
	"errors"
	"fmt"
)

// Code says what kind of failure an Error is, so the plugin can map it to
// the CNI error the runtime acts on.
type Code string

// The codes the agent answers with.
const (
	InvalidArgument   Code = "InvalidArgument"   // the request can never succeed as sent
	NotFound          Code = "NotFound"          // Check: no assignment for the attachment
	ResourceExhausted Code = "ResourceExhausted" // no address now; Reason says why
	Unavailable       Code = "Unavailable"       // the agent is stopping, or was not reached
	DeadlineExceeded  Code = "DeadlineExceeded"  // the call's context ended first
	Unimplemented     Code = "Unimplemented"     // a method this agent does not know
	Internal          Code = "Internal"          // anything else
)

// Error is a failed call: the agent's answer, or the client's account of
// why no answer came (Unreached).
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"`
	// Reason is a machine-readable cause, e.g. why no address was free.
	Reason string `json:"reason,omitempty"`
	// Unreached: no answer came (the socket refused, the connection broke,
	// or the deadline passed), as opposed to an answer that says no.
	Unreached bool `json:"-"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Errorf makes an Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError is err as an *Error; an error of another kind is Internal.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: Internal, Message: err.Error()}
}

// CodeOf is err's code; "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	return AsError(err).Code
}
