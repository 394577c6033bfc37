package kube

import "container/list"

// lru is a map that forgets its least recently used key past its size,
// for the recorder's caches (client-go's hold 4,096 entries each).
type lru[V any] struct {
	size  int
	order *list.List // of *lruEntry[V], most recently used first
	byKey map[string]*list.Element
}

type lruEntry[V any] struct {
	key   string
	value V
}

func newLRU[V any](size int) *lru[V] {
	return &lru[V]{size: size, order: list.New(), byKey: make(map[string]*list.Element)}
}

func (l *lru[V]) get(key string) (V, bool) {
	el, ok := l.byKey[key]
	if !ok {
		var zero V
		return zero, false
	}
	l.order.MoveToFront(el)
	return el.Value.(*lruEntry[V]).value, true
}

func (l *lru[V]) add(key string, v V) {
	if el, ok := l.byKey[key]; ok {
		el.Value.(*lruEntry[V]).value = v
		l.order.MoveToFront(el)
		return
	}
	l.byKey[key] = l.order.PushFront(&lruEntry[V]{key: key, value: v})
	if l.order.Len() > l.size {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.byKey, oldest.Value.(*lruEntry[V]).key)
	}
}
