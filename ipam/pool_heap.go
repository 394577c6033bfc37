package ipam

// indexedHeap is a binary min-heap whose elements remember their position,
// so an element whose ordering key changed is fixed or removed in O(log n)
// instead of being searched for. The pool keeps one per ENI (blocks with a
// free address) and one per node (ENIs with a free address).
type indexedHeap[T any] struct {
	items []T
	less  func(a, b T) bool
	// index returns where the element stores its position: -1 when it is
	// not in the heap.
	index func(T) *int
}

func (h *indexedHeap[T]) len() int { return len(h.items) }

func (h *indexedHeap[T]) contains(x T) bool { return *h.index(x) >= 0 }

// min returns the least element; the heap must not be empty.
func (h *indexedHeap[T]) min() T { return h.items[0] }

func (h *indexedHeap[T]) push(x T) {
	if h.contains(x) {
		panic("ipam: element pushed twice onto a heap")
	}
	*h.index(x) = len(h.items)
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

func (h *indexedHeap[T]) remove(x T) {
	i := *h.index(x)
	if i < 0 || i >= len(h.items) {
		panic("ipam: removing an element that is not on the heap")
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	*h.index(x) = -1
	if i < last {
		h.fix(i)
	}
}

// update restores the heap order after x's key changed.
func (h *indexedHeap[T]) update(x T) {
	i := *h.index(x)
	if i < 0 {
		panic("ipam: updating an element that is not on the heap")
	}
	h.fix(i)
}

func (h *indexedHeap[T]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *indexedHeap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.index(h.items[i]) = i
	*h.index(h.items[j]) = j
}

func (h *indexedHeap[T]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(h.items[j], h.items[i]) {
			return
		}
		h.swap(i, j)
		j = i
	}
}

// down reports whether the element at i moved.
func (h *indexedHeap[T]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
