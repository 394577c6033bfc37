package kube

import (
	"slices"
	"strconv"
	"strings"

	"github.com/vpcnet/vpcnet/netpol"
)

// podInterner shares what pods have in common: the pods of one
// Deployment carry equal label sets and named ports, and every pod of a
// namespace its name. Each pod decoded from the API server brings its
// own copies; at thousands of pods the label maps alone were the largest
// part of what enforcement keeps. A shared value is one of the pods'
// own, kept while some pod holds it; values are never changed once
// shared (the compiler only reads them), so sharing one changes no
// verdict, and a miscount could only keep or copy memory.
type podInterner struct {
	namespaces interned[string]
	labels     interned[map[string]string]
	ports      interned[[]netpol.ContainerPort]
}

func newPodInterner() *podInterner {
	return &podInterner{namespaces: interned[string]{}, labels: interned[map[string]string]{}, ports: interned[[]netpol.ContainerPort]{}}
}

// hold returns p with its namespace, labels and ports shared, counting
// p as a holder of each.
func (in *podInterner) hold(p netpol.Pod) netpol.Pod {
	p.Namespace = in.namespaces.hold(p.Namespace, p.Namespace)
	if len(p.Labels) > 0 {
		p.Labels = in.labels.hold(labelsKey(p.Labels), p.Labels)
	}
	if len(p.Ports) > 0 {
		p.Ports = in.ports.hold(portsKey(p.Ports), p.Ports)
	}
	return p
}

// release counts p, which hold returned, as a holder no more.
func (in *podInterner) release(p netpol.Pod) {
	in.namespaces.release(p.Namespace)
	if len(p.Labels) > 0 {
		in.labels.release(labelsKey(p.Labels))
	}
	if len(p.Ports) > 0 {
		in.ports.release(portsKey(p.Ports))
	}
}

// interned are shared values by their content's key, with their
// holders' count.
type interned[V any] map[string]*sharedValue[V]

type sharedValue[V any] struct {
	v     V
	holds int
}

func (m interned[V]) hold(key string, v V) V {
	if s, ok := m[key]; ok {
		s.holds++
		return s.v
	}
	m[key] = &sharedValue[V]{v: v, holds: 1}
	return v
}

func (m interned[V]) release(key string) {
	if s, ok := m[key]; ok {
		if s.holds--; s.holds <= 0 {
			delete(m, key)
		}
	}
}

// labelsKey is a label set's content as one string. NUL and SOH cannot
// occur in label keys or values.
func labelsKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	n := 0
	for k, v := range l {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(l[k])
		b.WriteByte(1)
	}
	return b.String()
}

// portsKey is a pod's named ports as one string, in their order.
func portsKey(ps []netpol.ContainerPort) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Name)
		b.WriteByte(0)
		b.WriteString(string(p.Protocol))
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(int(p.Port)))
		b.WriteByte(1)
	}
	return b.String()
}
