package policyqueue_test

import (
	"fmt"
	"testing"

	"github.com/placementlab/placement/impl/affinity"
	pq "github.com/placementlab/placement/impl/policyqueue"
)

// BenchmarkEnqueueRelease: an item admitted at once and released, on an
// empty queue (the router's fast path: Acquire that does not wait).
func BenchmarkEnqueueRelease(b *testing.B) {
	q, _ := pq.New(pq.Config{})
	for w := 0; w < 8; w++ {
		_, _ = q.SetCapacity(fmt.Sprintf("w%d", w), 4)
	}
	it := pq.Shared(affinity.WorkerOnly("w3"), affinity.WorkerOnly("w5"))
	b.ReportAllocs()
	for b.Loop() {
		_, adm, _ := q.Enqueue(it)
		adm[0].Release()
	}
}

// BenchmarkReleaseHandOff: a release that hands its slot to the next of
// 256 waiting items (half exact, half shared), which is then released in
// turn and replaced by a new item: the queue stays 256 deep.
func BenchmarkReleaseHandOff(b *testing.B) {
	q, _ := pq.New(pq.Config{})
	_, _ = q.SetCapacity("w0", 1)
	_, _ = q.SetCapacity("w1", 0)
	_, adm, _ := q.Enqueue(pq.Exact(affinity.WorkerOnly("w0")))
	slot := adm[0]
	items := []pq.Item{pq.Exact(affinity.Ranked("w0", 1)), pq.Shared(affinity.WorkerOnly("w1"), affinity.WorkerOnly("w0"))}
	for i := 0; i < 256; i++ {
		_, _, _ = q.Enqueue(items[i%2])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		next := slot.Release()
		slot = next[0]
		_, _, _ = q.Enqueue(items[i%2])
		i++
	}
}
