package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

// fakeAgent serves the introspection endpoints the way vpcnetd does, from
// the introspect types, and /metrics.
func fakeAgent(t *testing.T, st introspect.Status) *httptest.Server {
	t.Helper()
	return fakeAgentWithPolicy(t, st, enforcingPolicy())
}

// fakeAgentWithPolicy is fakeAgent serving pol at /v1/policy as vpcnetd
// does: the node's status, plus a pod's verdicts only when asked for that
// pod and pol has it (it runs on this node).
func fakeAgentWithPolicy(t *testing.T, st introspect.Status, pol introspect.PolicyStatus) *httptest.Server {
	t.Helper()
	since := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	serve := func(v any, code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	readyCode := http.StatusOK
	if !st.Ready {
		readyCode = http.StatusServiceUnavailable
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", serve(st, http.StatusOK))
	mux.HandleFunc("GET /v1/enis", serve([]introspect.ENI{{
		ID: "eni-0aaa", DeviceIndex: 0, Primary: true, SubnetID: "subnet-1", SubnetCIDR: "10.0.0.0/24",
		PrimaryIP: "10.0.0.10", Total: 5, Assigned: 1, Free: 4, DeleteOnTermination: true,
	}}, http.StatusOK))
	mux.HandleFunc("GET /v1/pods", serve([]introspect.Hold{{
		Address: "10.0.0.11", Pod: "default/web-1", ContainerID: "0123456789abcdef", IfName: "eth0", Network: "aws-cni", Since: since,
	}}, http.StatusOK))
	mux.HandleFunc("GET /v1/config", serve([]introspect.Setting{
		{Name: "WARM_IP_TARGET", Value: "5", Default: "0", Meaning: "free addresses to keep"},
		{Name: "AWS_SECRET_ACCESS_KEY", Value: "hunter2secret", Default: ""},
	}, http.StatusOK))
	mux.HandleFunc("GET /v1/policy", func(w http.ResponseWriter, r *http.Request) {
		out := pol
		out.Pods = nil
		for _, p := range pol.Pods {
			if pod := r.URL.Query().Get("pod"); pod == p.Namespace+"/"+p.Name {
				out.Pods = append(out.Pods, p)
			}
		}
		serve(out, http.StatusOK)(w, r)
	})
	mux.HandleFunc("GET /readyz", serve(introspect.Readyz{Ready: st.Ready, Conditions: st.Conditions}, readyCode))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("# TYPE vpcnet_addresses gauge\nvpcnet_addresses{state=\"free\"} 4\n"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func readyStatus() introspect.Status {
	since := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	return introspect.Status{
		Ready: true, Version: "(devel)", InstanceID: "i-0abc", InstanceType: "t3.medium", LimitsSource: "table",
		MaxENIs: 3, IPv4PerENI: 6, Addresses: introspect.Counts{Total: 5, Assigned: 1, Free: 4},
		MaxPods: introspect.MaxPods{Value: 17, Source: "EKS rule", Rule: 17, Addressable: 17, Recommended: 17},
		Conditions: []introspect.Condition{
			{Name: "checkpoint", OK: true, Message: "loaded 1 assignment", Since: since},
			{Name: "cloud", OK: true, Message: "EC2 answered", Since: since},
		},
	}
}

func notReadyStatus() introspect.Status {
	st := readyStatus()
	st.Ready = false
	st.Conditions[1] = introspect.Condition{Name: "cloud", OK: false, Message: "EC2 DescribeNetworkInterfaces: UnauthorizedOperation", Since: st.Conditions[1].Since}
	st.LastEC2Error = "UnauthorizedOperation: not allowed"
	held := st.Conditions[1].Since.Add(time.Minute)
	st.GrowthHeldUntil = &held
	st.Planned = []string{"attach an ENI: 0 free, WARM_IP_TARGET=5"}
	st.Quarantined = []string{"10.0.0.12"}
	st.StaleEntries = []introspect.Hold{{Address: "10.0.0.13", ContainerID: "deadbeef", IfName: "eth0"}}
	st.MaxPods = introspect.MaxPods{Value: 110, Source: "kubelet", Kubelet: 110, Addressable: 29, Recommended: 29, Warning: true,
		Problem: "the kubelet advertises 110 pods, but this node (t3.medium with secondary addresses) can address only 29"}
	return st
}

// enforcingPolicy is a node enforcing NetworkPolicy with its rules up to
// date (applied 12 s before the call): default/web-1 is isolated for
// ingress by two policies, default/db-0 both ways with nothing allowed
// out.
func enforcingPolicy() introspect.PolicyStatus {
	return introspect.PolicyStatus{
		Enabled: true, Mode: "standard", Synced: true, Policies: 3, Isolated: 2,
		Applied: time.Now().Add(-12 * time.Second),
		Pods: []introspect.PolicyPod{{
			Namespace: "default", Name: "web-1", IP: "10.0.0.11", Known: true,
			Ingress: &introspect.PolicyDirection{
				Policies: []string{"default/allow-web", "default/deny-all"},
				Allows: []introspect.PolicyAllow{
					{Rule: "default/allow-web ingress[0]", Peers: []string{"10.0.1.0/24", "10.0.2.7/32"}, Ports: []string{"TCP/80", "UDP/5000-5010"}},
					{Rule: "default/allow-web ingress[1]", AnyPeer: true},
					{Rule: "default/allow-web ingress[2]", Ports: []string{"SCTP"}},
				},
			},
			DroppedIngress: 12,
		}, {
			Namespace: "default", Name: "db-0", IP: "10.0.0.12", Known: true,
			Ingress: &introspect.PolicyDirection{Policies: []string{"default/db"}, Allows: []introspect.PolicyAllow{
				{Rule: "default/db ingress[0]", Peers: []string{"10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32", "10.0.0.4/32", "10.0.0.5/32",
					"10.0.0.6/32", "10.0.0.7/32", "10.0.0.8/32", "10.0.0.9/32", "10.0.0.10/32"}, Ports: []string{"TCP/5432"}},
			}},
			Egress:        &introspect.PolicyDirection{Policies: []string{"default/deny-all"}, Allows: []introspect.PolicyAllow{}},
			DroppedEgress: 3,
		}},
	}
}

// unreachableAddr is an address where nothing listens.
func unreachableAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
