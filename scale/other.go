package scale

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// otherActions are what another cluster's agents spend of the account
// while they grow their pools: the same mutating actions as this one's.
var otherActions = []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute", "AssignPrivateIpAddresses"}

// otherClient is another client of the account, which the budget
// controller neither grants nor hears of: each of otherActions at
// OtherShare of its bucket's refill, evenly spaced. Its calls are
// DryRuns (or, where the API has none, calls on an ENI that does not
// exist), which EC2 counts against the action's bucket like any call and
// which change nothing, so the figures are this cluster's.
type otherClient struct {
	r       *run
	ec2     *ec2.Client
	stopped bool
	// refused counts the calls EC2 answered RequestLimitExceeded, by
	// action.
	refused map[string]int
	sent    int
}

func newOtherClient(r *run) *otherClient {
	tr := newTransport(r.cloud.EC2Handler(), nil, r.clk.Now)
	c := ec2.NewFromConfig(aws.Config{
		Region: "us-west-2", BaseEndpoint: aws.String("http://ec2.sim"),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDOTHER", "secret", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
		HTTPClient:  &http.Client{Transport: tr},
	})
	return &otherClient{r: r, ec2: c, refused: map[string]int{}}
}

// start schedules every action's calls, each at its own even pace.
func (o *otherClient) start() {
	for _, a := range otherActions {
		b := o.r.opts.Account.bucketFor(a)
		if b.Refill <= 0 {
			continue
		}
		gap := time.Duration(float64(time.Second) / (b.Refill * o.r.opts.OtherShare))
		var tick func()
		tick = func() {
			if o.stopped {
				return
			}
			o.call(a)
			o.r.q.at(o.r.now().Add(gap), tick)
		}
		o.r.q.at(o.r.now().Add(gap), tick)
	}
}

func (o *otherClient) stop() { o.stopped = true }

// call makes one DryRun of action; the emulator answers at once, in the
// driver's time.
func (o *otherClient) call(action string) {
	ctx, dry := o.r.ctx, aws.Bool(true)
	var err error
	switch action {
	case "CreateNetworkInterface":
		_, err = o.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-00"), DryRun: dry})
	case "AttachNetworkInterface":
		_, err = o.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String("eni-0000000000000other"),
			InstanceId: aws.String(instanceID(0)), DeviceIndex: aws.Int32(1), DryRun: dry})
	case "ModifyNetworkInterfaceAttribute":
		_, err = o.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String("eni-0000000000000other"), DryRun: dry})
	case "AssignPrivateIpAddresses":
		// The API has no DryRun for it; an ENI of nobody's spends the
		// token as well, EC2 counting a call before it reads it.
		_, err = o.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String("eni-0000000000000other"),
			SecondaryPrivateIpAddressCount: aws.Int32(1)})
	default:
		o.r.fatal(fmt.Errorf("the account's other client has no call for %s (otherActions and call disagree)", action))
		return
	}
	o.sent++
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae) && ae.ErrorCode() == "RequestLimitExceeded":
		o.refused[action]++
	case errors.As(err, &ae):
		// DryRunOperation, or the ENI not found: the bucket was spent.
	case err != nil:
		o.r.fatal(fmt.Errorf("the account's other client: %s: %w", action, err))
	}
}
