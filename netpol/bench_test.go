package netpol

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bigCluster is 1,000 policies over 50 namespaces and 5,000 pods, and a
// node's 110 pods among them: the scale the goals name.
func bigCluster() (*Cluster, []Local) {
	r := rand.New(rand.NewPCG(1, 2))
	c := &Cluster{Namespaces: map[string]map[string]string{}}
	for i := range 50 {
		c.Namespaces[fmt.Sprintf("ns%d", i)] = map[string]string{"kubernetes.io/metadata.name": fmt.Sprintf("ns%d", i), "team": vocab[i%3]}
	}
	var local []Local
	for i := range 5000 {
		p := Pod{Namespace: fmt.Sprintf("ns%d", i%50), Name: fmt.Sprintf("p%d", i), Labels: randomLabels(r),
			IP:    netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
			Ports: []ContainerPort{{Name: "web", Protocol: TCP, Port: 8080}}}
		c.Pods = append(c.Pods, p)
		if i%45 == 0 {
			local = append(local, Local{Pod: p})
		}
	}
	for i := range 1000 {
		np := randomPolicy(r, fmt.Sprintf("ns%d", i%50), fmt.Sprintf("np%d", i))
		c.Policies = append(c.Policies, np)
	}
	// One namespace-wide default deny, as clusters commonly have.
	c.Policies = append(c.Policies, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns0", Name: "default-deny"}})
	return c, local
}

func BenchmarkCompile1000Policies5000Pods(b *testing.B) {
	c, local := bigCluster()
	b.ReportAllocs()
	var isolated int
	for b.Loop() {
		isolated = len(Compile(c, local, Standard).Pods)
	}
	b.ReportMetric(float64(isolated), "isolated-pods")
}

// BenchmarkCompilerOnAnUnchangedCluster is a write of the node's rules
// between two changes of the cluster, as an ADD makes: the Compiler's
// index and rules' peers are kept, the node's 110 pods compiled again.
func BenchmarkCompilerOnAnUnchangedCluster(b *testing.B) {
	c, local := bigCluster()
	c.Generation = 1
	var cc Compiler
	cc.Compile(c, local, Standard)
	b.ReportAllocs()
	for b.Loop() {
		cc.Compile(c, local, Standard)
	}
}
