package cloud

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/sim/simtest"
)

// fakeEC2 is an EC2 Query endpoint answering from a script: reply gets
// the 0-based number of the request and its form and returns a status and
// an XML body. It records every request.
type fakeEC2 struct {
	reply func(n int, form url.Values) (int, string)

	// mu guards forms.
	mu    sync.Mutex
	forms []url.Values
}

func (f *fakeEC2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := len(f.forms)
	f.forms = append(f.forms, r.PostForm)
	f.mu.Unlock()
	status, body := f.reply(n, r.PostForm)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func (f *fakeEC2) requests() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.forms...)
}

// ec2Error is the body EC2 sends with a 4xx or 5xx.
func ec2Error(code, msg string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>` + code +
		`</Code><Message>` + msg + `</Message></Error></Errors><RequestID>req-1</RequestID></Response>`
}

// ec2OK wraps inner in the response element of action.
func ec2OK(action, inner string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><` + action + `Response xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>req-1</requestId>` +
		inner + `</` + action + `Response>`
}

// testOptions are Options for a client of an EC2 at endpoint, off
// instance, with fast backoff.
func testOptions(endpoint string, reg prometheus.Registerer) Options {
	return Options{
		Region:      "us-west-2",
		EC2Endpoint: endpoint,
		NoIMDS:      true,
		InstanceID:  "i-test",
		ClusterName: "test-cluster",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		MaxAttempts: 5,
		MaxBackoff:  time.Millisecond,
		Registerer:  reg,
		Now:         func() time.Time { return time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC) },
	}
}

// newFakeClient serves f over loopback and builds a client of it; edit
// adjusts the options.
func newFakeClient(t *testing.T, f *fakeEC2, edit func(*Options)) (*Client, *prometheus.Registry) {
	t.Helper()
	simtest.IsolateAWSEnv(t)
	reg := prometheus.NewRegistry()
	o := testOptions(simtest.Serve(t, f), reg)
	if edit != nil {
		edit(&o)
	}
	c, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, reg
}

// histogram returns the sample count and sum of one action's series.
func histogram(t *testing.T, reg *prometheus.Registry, name, action string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "action" && lp.GetValue() == action {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// requestTags collects TagSpecification.1.Tag.N.{Key,Value} of a form.
func requestTags(form url.Values) map[string]string {
	tags := map[string]string{}
	for k, v := range form {
		if rest, ok := strings.CutPrefix(k, "TagSpecification.1.Tag."); ok && strings.HasSuffix(rest, ".Key") {
			n := strings.TrimSuffix(rest, ".Key")
			tags[v[0]] = form.Get("TagSpecification.1.Tag." + n + ".Value")
		}
	}
	return tags
}

// numbered collects prefix.1, prefix.2, ... of a form, in order.
func numbered(form url.Values, prefix string) []string {
	var keys []string
	for k := range form {
		if strings.HasPrefix(k, prefix+".") && !strings.Contains(strings.TrimPrefix(k, prefix+"."), ".") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, form.Get(k))
	}
	return out
}
