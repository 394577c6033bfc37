package kube

import "k8s.io/utils/lru"

// lruOf is k8s.io/utils/lru typed for one kind of value: the recorder's
// caches forget their least recently used key past their size
// (client-go's recorder holds 4,096 entries each).
type lruOf[V any] struct{ c *lru.Cache }

func newLRU[V any](size int) *lruOf[V] { return &lruOf[V]{c: lru.New(size)} }

func (l *lruOf[V]) get(key string) (V, bool) {
	v, ok := l.c.Get(key)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (l *lruOf[V]) add(key string, v V) { l.c.Add(key, v) }
