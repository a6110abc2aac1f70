package benchmarks

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// TTL is every placer's idle TTL, in nanoseconds (one hour).
const TTL = ttl

// Keys returns n session keys, "session-0" to "session-<n-1>".
func Keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "session-" + strconv.Itoa(i)
	}
	return ks
}

// RequestKeys returns fresh copies of ks for lookups. A router's lookup key
// arrives in a new request buffer, so it never shares bytes with the key a
// table stored; looking up with the very strings a baseline stored would let
// Go's string comparison succeed on pointer equality without reading the
// stored key, a shortcut no router gets (and the coordinator, which copies
// keys it stores, never got).
func RequestKeys(ks []string) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = strings.Clone(k)
	}
	return out
}

// Order returns a fixed pseudo-random visiting order of m indexes below n,
// so large tables are not walked in insertion order, which would flatter
// caches.
func Order(n, m int) []int32 {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]int32, m)
	for i := range out {
		out[i] = int32(rng.IntN(n))
	}
	return out
}

// AcquireCoarseClock counts a user of the baselines' shared coarse clock
// (CoarseTick resolution), starting its ticker for the first one; the
// returned function ends this use (call it once).
func AcquireCoarseClock() (release func()) {
	coarse.acquire()
	return coarse.release
}

// CoarseNow reads the shared coarse clock: nanoseconds since its epoch, one
// atomic load. It advances only while some user holds it
// (AcquireCoarseClock).
func CoarseNow() int64 { return coarse.now() }
