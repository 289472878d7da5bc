package proposals

import "sync"

// batcher has work that arrives while other work is being written wait
// and be written together: up to writers batches are written at once,
// each by the goroutine of one of its items (its leader), and an item
// that arrives while all of them write waits in the queue for the next.
// There is no timer: an item waits only while writers batches are
// already being written, so one caller alone never waits for anybody.
//
// As soon as a batch is on its way (write calls sent, or returns), the
// turn to lead passes to the first queued item without one, so the next
// batch is written while this one finishes.
type batcher[T any] struct {
	writers, max int
	write        func(items []T, sent func())

	mu      sync.Mutex
	queue   []*batchItem[T]
	leaders int // items leading (or promoted to lead) a batch
}

// batchItem is one item waiting in (or leading) the batcher.
type batchItem[T any] struct {
	v T
	// lead carries the item's turn to lead a batch (at most one: see
	// promoted).
	lead     chan struct{}
	promoted bool
	done     chan struct{}
}

// do queues v and returns once it was written, leading a batch when its
// turn comes.
func (b *batcher[T]) do(v T) {
	it := &batchItem[T]{v: v, lead: make(chan struct{}, 1), done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, it)
	if b.leaders < b.writers {
		b.leaders++
		it.promoted = true
		it.lead <- struct{}{}
	}
	b.mu.Unlock()
	for {
		select {
		case <-it.lead:
			b.leadOne()
		case <-it.done:
			// Written in another's batch after being promoted: the turn to
			// lead is still this item's to take (or hand on).
			select {
			case <-it.lead:
				b.leadOne()
			default:
			}
			return
		}
	}
}

// leadOne writes one batch of the items queued now (at most max).
func (b *batcher[T]) leadOne() {
	b.mu.Lock()
	n := min(len(b.queue), b.max)
	items := make([]*batchItem[T], n)
	copy(items, b.queue)
	b.queue = append(b.queue[:0:0], b.queue[n:]...)
	b.mu.Unlock()

	var once sync.Once
	handOff := func() { once.Do(b.handOff) }
	defer handOff()
	defer func() {
		for _, it := range items {
			close(it.done)
		}
	}()
	if n > 0 {
		vs := make([]T, n)
		for i, it := range items {
			vs[i] = it.v
		}
		b.write(vs, handOff)
	}
}

// handOff passes a turn to lead to the first queued item without one, or
// gives it up when there is none.
func (b *batcher[T]) handOff() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range b.queue {
		if !it.promoted {
			it.promoted = true
			it.lead <- struct{}{}
			return
		}
	}
	b.leaders--
}
