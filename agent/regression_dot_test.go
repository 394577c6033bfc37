package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/internal/testlog"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// lossyAttach lets EC2 perform the first AttachNetworkInterface and then
// answers the client with a 500, as when the response is lost on the way
// back: the client sees a failure for an attachment that exists.
type lossyAttach struct {
	next http.Handler
	mu   sync.Mutex
	eni  string // the ENI whose attachment was hidden, once it was
}

func (l *lossyAttach) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	hide := l.eni == "" && r.PostForm.Get("Action") == "AttachNetworkInterface"
	if hide {
		l.eni = r.PostForm.Get("NetworkInterfaceId")
	}
	l.mu.Unlock()
	// ParseForm consumed the body; hand the emulator the same form.
	r.Body = http.NoBody
	body := r.PostForm.Encode()
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(strings.NewReader(body))
	r2.ContentLength = int64(len(body))
	r2.PostForm, r2.Form = nil, nil
	if !hide {
		l.next.ServeHTTP(rw, r2)
		return
	}
	l.next.ServeHTTP(httptest.NewRecorder(), r2)
	rw.Header().Set("Content-Type", "text/xml")
	rw.WriteHeader(http.StatusInternalServerError)
	fmt.Fprint(rw, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>InternalError</Code><Message>An internal error has occurred</Message></Error></Errors><RequestID>lost</RequestID></Response>`)
}

func (l *lossyAttach) hidden() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.eni
}

// observer is an EC2 client of the test's own, to read what EC2 holds.
func (w *world) observer(t *testing.T) *cloud.Client {
	t.Helper()
	c, err := cloud.New(context.Background(), cloud.Options{
		EC2Endpoint: w.ec2, Region: "us-west-2", InstanceID: "i-observer", NoIMDS: true,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		ClusterName: "sim", MaxBackoff: 5 * time.Millisecond, Registerer: prometheus.NewRegistry(), Logger: testlog.New(t, slog.LevelWarn),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withoutDOT lists the ENIs attached to instance that EC2 would keep
// after the instance terminates.
func withoutDOT(ctx context.Context, c *cloud.Client, instance string) (attached int, missing []string, err error) {
	enis, err := c.ListENIs(ctx, cloud.ENIFilter{InstanceID: instance})
	if err != nil {
		return 0, nil, err
	}
	for _, e := range enis {
		if e.Attachment == nil {
			continue
		}
		attached++
		if !e.Attachment.DeleteOnTermination {
			missing = append(missing, e.ID)
		}
	}
	return attached, missing, nil
}

// Issue 11, "an attach that EC2 performed but the client saw fail": the
// ENI is attached all the same and must carry DeleteOnTermination, or it
// outlives the instance as a leak.
func TestAnAttachReportedFailedStillGetsDeleteOnTermination(t *testing.T) {
	w := newWorld(t)
	lossy := &lossyAttach{next: w.countCalls(w.cloud.EC2Handler())}
	w.ec2 = simtest.Serve(t, lossy)
	obs := w.observer(t)
	// More warm addresses than the primary ENI holds: a second ENI.
	n := w.node("i-node1", map[string]string{"WARM_IP_TARGET": "15"})
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		eni := lossy.hidden()
		if eni != "" {
			enis, err := obs.DescribeENIs(ctx, eni)
			if err == nil && len(enis) == 1 {
				e := enis[0]
				switch {
				case e.Attachment != nil && e.Attachment.DeleteOnTermination:
					return // adopted and safe
				case e.Attachment == nil && time.Now().After(deadline):
					t.Fatalf("%s, whose attachment answer was lost, is %s and attached to nothing 30 s later: a leaked ENI", eni, e.Status)
				}
			}
			if err != nil && strings.Contains(err.Error(), "InvalidNetworkInterfaceID.NotFound") {
				return // deleted: nothing left behind
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q, whose attachment answer was lost, has no DeleteOnTermination 30 s later", eni)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Issue 11, "setting DeleteOnTermination gives up under throttling":
// EC2 throttles ModifyNetworkInterfaceAttribute while the node attaches
// its warm ENI; once the throttling ends, the ENI must get the flag
// without any restart.
func TestDeleteOnTerminationIsRetriedAfterThrottling(t *testing.T) {
	w := newWorld(t)
	obs := w.observer(t)
	w.cloud.SetFault("ModifyNetworkInterfaceAttribute", sim.Fault{ErrorRate: 1, Code: "RequestLimitExceeded"})
	n := w.node("i-node1", map[string]string{"WARM_IP_TARGET": "15"})
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	// Wait for the warm ENI to be attached while every attempt to set
	// its flag is throttled, and a little longer: the client's own
	// retries are long spent by then.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		attached, _, err := withoutDOT(ctx, obs, "i-node1")
		if err == nil && attached >= 2 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the node attached no second ENI within 20 s (%d attached, %v)", attached, err)
		}
	}
	time.Sleep(2 * time.Second)
	w.cloud.SetFault("ModifyNetworkInterfaceAttribute", sim.Fault{})
	var missing []string
	for start := time.Now(); time.Since(start) < 40*time.Second; time.Sleep(200 * time.Millisecond) {
		var err error
		if _, missing, err = withoutDOT(ctx, obs, "i-node1"); err == nil && len(missing) == 0 {
			return
		}
	}
	t.Fatalf("ENIs %v of the node still lack DeleteOnTermination 40 s after the throttling ended", missing)
}
