package cloud

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// attemptsKey carries a call's attempt counter from call down to the
// attempt middleware, which the SDK runs once per try.
type attemptsKey struct{}

// call runs one SDK operation (or one page of one) under the call timeout
// and records its metrics. fn must make exactly one SDK call with the ctx it
// is given.
func (c *Client) call(ctx context.Context, action string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	var attempts atomic.Int64
	ctx = context.WithValue(ctx, attemptsKey{}, &attempts)

	start := time.Now()
	err := fn(ctx)
	c.metrics.requests.WithLabelValues(action).Inc()
	c.metrics.duration.WithLabelValues(action).Observe(time.Since(start).Seconds())
	n := int(attempts.Load())
	if n > 1 {
		c.metrics.retries.WithLabelValues(action).Add(float64(n - 1))
	}
	if err == nil {
		if n > 1 {
			c.log.Debug("EC2 call succeeded after retries", "action", action, "attempts", n)
		}
		return nil
	}
	code := metricCode(err)
	c.metrics.errors.WithLabelValues(action, code).Inc()
	if code == "RequestLimitExceeded" && c.onThrottled != nil {
		c.onThrottled(action)
	}
	c.log.Debug("EC2 call failed", "action", action, "attempts", n, "code", code, "err", err)
	return compactError(err, n)
}

// addAttemptMiddleware puts handleAttempt right after the SDK's retry loop,
// so it runs once per attempt, before signing.
func (c *Client) addAttemptMiddleware(stack *middleware.Stack) error {
	return stack.Finalize.Insert(
		middleware.FinalizeMiddlewareFunc("vpcnet.io/Attempt", c.handleAttempt),
		"Retry", middleware.After)
}

// handleAttempt counts the attempt and takes a token from the action's
// bucket. Every attempt pays, retries included: EC2 charges each request
// to the account's bucket, and a retry storm is what the buckets exist to
// stop.
func (c *Client) handleAttempt(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if n, ok := ctx.Value(attemptsKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	action := awsmiddle.GetOperationName(ctx)
	waited, err := c.buckets.wait(ctx, action)
	c.metrics.throttleWait.WithLabelValues(action).Observe(waited.Seconds())
	if err != nil {
		return middleware.FinalizeOutput{}, middleware.Metadata{}, err
	}
	out, md, err := next.HandleFinalize(ctx, in)
	var api smithy.APIError
	if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "DryRunOperation") {
		// What a retry was for: the call's outcome logs only the last.
		c.log.Debug("EC2 attempt failed", "action", action, "err", err)
	}
	return out, md, err
}

// APIError is an EC2 error response cut down to what an operator needs:
// the code, EC2's message, and how many attempts were made. The SDK's full
// error stays reachable through errors.As / errors.Unwrap.
type APIError struct {
	Code      string
	Message   string
	RequestID string
	Attempts  int
	err       error
}

func (e *APIError) Error() string {
	s := e.Code + ": " + e.Message
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

func (e *APIError) Unwrap() error { return e.err }

// compactError turns the SDK's long operation error into an APIError when
// EC2 answered, or notes the attempts when it did not.
func compactError(err error, attempts int) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		e := &APIError{Code: api.ErrorCode(), Message: api.ErrorMessage(), Attempts: attempts, err: err}
		var rid interface{ ServiceRequestID() string }
		if errors.As(err, &rid) {
			e.RequestID = rid.ServiceRequestID()
		}
		return e
	}
	if attempts > 1 {
		return fmt.Errorf("after %d attempts: %w", attempts, err)
	}
	return err
}

// metricCode is the code label: EC2's error code, or a fallback naming why
// there was no answer.
func metricCode(err error) string {
	if code := ErrorCode(err); code != "" {
		return code
	}
	switch {
	case errors.Is(err, ErrClientThrottled):
		return "ClientThrottled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	}
	return "Other"
}
