package cloud

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// ErrorCode is the AWS error code in err's chain ("RequestLimitExceeded"),
// or "" when EC2 never answered (timeout, connection refused, client-side
// throttle).
func ErrorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// ErrorAction is the EC2 action whose call err answers, or "" when err
// says none (the SDK's operation error names it).
func ErrorAction(err error) string {
	var op *smithy.OperationError
	if errors.As(err, &op) {
		return op.OperationName
	}
	return ""
}

// ErrorMessage is EC2's message in err, or "" when err is no EC2 answer.
func ErrorMessage(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorMessage()
	}
	return ""
}

func codeIn(err error, codes ...string) bool {
	code := ErrorCode(err)
	if code == "" {
		return false
	}
	for _, c := range codes {
		if code == c {
			return true
		}
	}
	return false
}

// IsSubnetExhausted reports that the subnet has no free address
// (InsufficientFreeAddressesInSubnet) or, with prefix delegation, no free
// contiguous /28 (InsufficientCidrBlocks, which a fragmented subnet gives
// even with addresses left). The fix is a bigger or additional subnet, or
// custom networking; retrying does not help.
func IsSubnetExhausted(err error) bool {
	return codeIn(err, "InsufficientFreeAddressesInSubnet", "InsufficientCidrBlocks")
}

// IsSubnetFragmented reports that EC2 found no free aligned /28 for a
// prefix (InsufficientCidrBlocks), which a fragmented subnet gives with
// addresses left: single secondary addresses may still be had. The fix
// is a subnet CIDR reservation of type prefix, or another subnet.
func IsSubnetFragmented(err error) bool {
	return codeIn(err, "InsufficientCidrBlocks")
}

// IsAttachmentLimit reports that the instance already has as many ENIs as
// its type allows (AttachmentLimitExceeded).
func IsAttachmentLimit(err error) bool {
	return codeIn(err, "AttachmentLimitExceeded")
}

// IsAddressLimit reports that the ENI already holds as many addresses (or
// prefixes) as the instance type allows per ENI
// (PrivateIpAddressLimitExceeded).
func IsAddressLimit(err error) bool {
	return codeIn(err, "PrivateIpAddressLimitExceeded")
}

// IsThrottled reports that EC2 throttled the call even after retries
// (RequestLimitExceeded), or that this client's own token bucket could not
// give a token before the call's deadline.
func IsThrottled(err error) bool {
	return errors.Is(err, ErrClientThrottled) || codeIn(err, "RequestLimitExceeded")
}

// IsUnauthorized reports that the credentials may not make the call:
// UnauthorizedOperation (an IAM policy denies the EC2 action; the message
// carries an encoded authorization message), AuthFailure (the credentials
// themselves are invalid or expired), or AccessDenied /
// AccessDeniedException as other AWS services (STS, for an assumed role)
// spell it.
func IsUnauthorized(err error) bool {
	return codeIn(err, "UnauthorizedOperation", "AuthFailure", "AccessDenied", "AccessDeniedException")
}

// IsNotFound reports that the object the call names does not exist
// (InvalidNetworkInterfaceID.NotFound, InvalidAttachmentID.NotFound, and the
// other *.NotFound codes). For DeleteENI and DetachENI that means the work
// is already done.
func IsNotFound(err error) bool {
	return strings.HasSuffix(ErrorCode(err), ".NotFound")
}
