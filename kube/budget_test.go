package kube

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestBudgetEndpointReadsTheLeaseHolder(t *testing.T) {
	now := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Time, seconds int) string {
		return fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"vpcnet-budget","namespace":"kube-system"},
			"spec":{"holderIdentity":%q,"leaseDurationSeconds":%d,"acquireTime":"2026-11-26T04:00:00.000000Z","renewTime":%q,"leaseTransitions":2}}`,
			holder, seconds, renewed.Format("2006-01-02T15:04:05.000000Z07:00"))
	}
	const notFound = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"leases.coordination.k8s.io \"vpcnet-budget\" not found","reason":"NotFound","details":{"name":"vpcnet-budget","group":"coordination.k8s.io","kind":"leases"},"code":404}`
	const forbidden = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"leases.coordination.k8s.io \"vpcnet-budget\" is forbidden: User \"system:serviceaccount:kube-system:vpcnet\" cannot get resource \"leases\"","reason":"Forbidden","details":{"name":"vpcnet-budget","group":"coordination.k8s.io","kind":"leases"},"code":403}`
	tests := []struct {
		name    string
		code    int
		body    string
		want    string
		wantErr []string
		noLead  bool // the error wraps ErrNoBudgetLeader
	}{
		{name: "live leader", code: 200, body: lease("vpcnet-budget-7d9f-abcde 10.0.1.17:61680", now.Add(-5*time.Second), 15), want: "10.0.1.17:61680"},
		{name: "IPv6 leader", code: 200, body: lease("vpcnet-budget-7d9f-abcde [fd00::1]:61680", now.Add(-time.Second), 15), want: "[fd00::1]:61680"},
		{name: "expired", code: 200, body: lease("p 10.0.1.17:61680", now.Add(-20*time.Second), 15), noLead: true,
			wantErr: []string{"no budget controller leader", "kube-system/vpcnet-budget", "expired 5s ago"}},
		{name: "expires exactly now", code: 200, body: lease("p 10.0.1.17:61680", now.Add(-15*time.Second), 15), noLead: true, wantErr: []string{"expired 0s ago"}},
		{name: "released", code: 200, body: lease("", now, 1), noLead: true, wantErr: []string{"lease kube-system/vpcnet-budget has no holder"}},
		{name: "holder names no address", code: 200, body: lease("vpcnet-budget-7d9f-abcde", now, 15), wantErr: []string{"names no address"}},
		{name: "not found", code: 404, body: notFound, noLead: true,
			wantErr: []string{"no budget controller leader: lease kube-system/vpcnet-budget not found"}},
		{name: "forbidden", code: 403, body: forbidden, wantErr: []string{"cannot get resource", "Role vpcnet in deploy/vpcnet.yaml"}},
		{name: "server error", code: 500, body: `oops`, wantErr: []string{"read lease kube-system/vpcnet-budget"}},
		{name: "not JSON", code: 200, body: `{"spec":`, wantErr: []string{"decode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotPath, gotAccept string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotAccept = r.URL.Path, r.Header.Get("Accept")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.code)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			// The agent's own client: core/v1, protobuf preferred.
			rc := &rest.Config{Host: srv.URL}
			rc.ContentType = "application/vnd.kubernetes.protobuf"
			rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
			core, err := newRESTCore(rc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := BudgetEndpoint(t.Context(), core.rc, "kube-system", "vpcnet-budget", now)
			if gotPath != "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/vpcnet-budget" || gotAccept != "application/json" {
				t.Errorf("asked for %s accepting %q", gotPath, gotAccept)
			}
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Fatalf("BudgetEndpoint = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("BudgetEndpoint = %q, want an error", got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if errors.Is(err, ErrNoBudgetLeader) != tt.noLead {
				t.Errorf("errors.Is(%v, ErrNoBudgetLeader) = %v, want %v", err, !tt.noLead, tt.noLead)
			}
		})
	}
}
