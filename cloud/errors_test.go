package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestEC2ErrorsAreClassifiedForTheOperator(t *testing.T) {
	type class struct{ subnet, attach, addr, throttled, unauth, notFound bool }
	tests := []struct {
		code string
		want class
	}{
		{"InsufficientFreeAddressesInSubnet", class{subnet: true}},
		{"InsufficientCidrBlocks", class{subnet: true}},
		{"AttachmentLimitExceeded", class{attach: true}},
		{"PrivateIpAddressLimitExceeded", class{addr: true}},
		{"UnauthorizedOperation", class{unauth: true}},
		{"AuthFailure", class{unauth: true}},
		{"AccessDenied", class{unauth: true}},
		{"InvalidNetworkInterfaceID.NotFound", class{notFound: true}},
		{"InvalidAttachmentID.NotFound", class{notFound: true}},
		{"InvalidParameterValue", class{}},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			f := &fakeEC2{reply: func(int, url.Values) (int, string) {
				return 400, ec2Error(tt.code, "the message from EC2")
			}}
			c, _ := newFakeClient(t, f, nil)
			_, err := c.CreateENI(context.Background(), CreateENIInput{SubnetID: "subnet-a", SecondaryAddresses: 2})
			if err == nil {
				t.Fatal("CreateENI succeeded against an error reply")
			}
			got := class{IsSubnetExhausted(err), IsAttachmentLimit(err), IsAddressLimit(err), IsThrottled(err), IsUnauthorized(err), IsNotFound(err)}
			if got != tt.want {
				t.Errorf("classes of %s = %+v, want %+v", tt.code, got, tt.want)
			}
			if ErrorCode(err) != tt.code {
				t.Errorf("ErrorCode = %q, want %q", ErrorCode(err), tt.code)
			}
			want := "create ENI in subnet-a: " + tt.code + ": the message from EC2"
			if err.Error() != want {
				t.Errorf("error reads %q, want %q", err, want)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%s was sent %d times; a client error must not be retried", tt.code, n)
			}
			var api smithy.APIError
			if !errors.As(err, &api) {
				t.Error("the SDK's APIError is not reachable through the chain")
			}
			if v := testutil.ToFloat64(c.metrics.errors.WithLabelValues("CreateNetworkInterface", tt.code)); v != 1 {
				t.Errorf("vpcnet_ec2_errors_total{code=%s} = %v, want 1", tt.code, v)
			}
		})
	}
}

func TestErrorCodeIsEmptyWithoutAnAnswer(t *testing.T) {
	if got := ErrorCode(errors.New("dial tcp: connection refused")); got != "" {
		t.Errorf("ErrorCode of a transport error = %q, want empty", got)
	}
	if IsNotFound(errors.New("x.NotFound")) {
		t.Error("IsNotFound matched error text rather than an AWS code")
	}
}

func TestAPIErrorNamesAttemptsWhenRetried(t *testing.T) {
	f := &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 503, ec2Error("RequestLimitExceeded", "Request limit exceeded.")
	}}
	c, _ := newFakeClient(t, f, func(o *Options) { o.MaxAttempts = 3 })
	err := c.DeleteENI(context.Background(), "eni-1")
	if !IsThrottled(err) {
		t.Fatalf("err = %v, want throttled", err)
	}
	if !strings.HasSuffix(err.Error(), "(after 3 attempts)") || !strings.HasPrefix(err.Error(), "delete eni-1: RequestLimitExceeded") {
		t.Errorf("error reads %q", err)
	}
}

// TestAThrottledCallIsReportedToOnThrottled: the budget controller is
// told of RequestLimitExceeded answers (after the SDK's retries), and of
// nothing else.
func TestAThrottledCallIsReportedToOnThrottled(t *testing.T) {
	code := "RequestLimitExceeded"
	f := &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 503, ec2Error(code, "Request limit exceeded.")
	}}
	var heard []string
	c, _ := newFakeClient(t, f, func(o *Options) {
		o.MaxAttempts = 2
		o.OnThrottled = func(action string) { heard = append(heard, action) }
	})
	_ = c.DeleteENI(context.Background(), "eni-1")
	code = "InvalidNetworkInterfaceID.NotFound"
	_ = c.DeleteENI(context.Background(), "eni-2")
	if len(heard) != 1 || heard[0] != "DeleteNetworkInterface" {
		t.Fatalf("OnThrottled heard %v; want [DeleteNetworkInterface] once", heard)
	}
}

func TestErrorActionNamesTheCallAnErrorAnswers(t *testing.T) {
	err := fmt.Errorf("assign 2 addresses to eni-1: %w", &smithy.OperationError{ServiceID: "EC2", OperationName: "AssignPrivateIpAddresses",
		Err: &smithy.GenericAPIError{Code: "UnauthorizedOperation"}})
	if got := ErrorAction(err); got != "AssignPrivateIpAddresses" {
		t.Errorf("ErrorAction = %q, want AssignPrivateIpAddresses", got)
	}
	if got := ErrorAction(errors.New("no EC2 call")); got != "" {
		t.Errorf("ErrorAction of an error from no call = %q, want empty", got)
	}
}
