package picker_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/picker"
	"github.com/placementlab/placement/impl/placement"
)

// TestConcurrentPipelines: pipelines over every built-in, picked and
// observed from many goroutines while targets are forgotten, are race-free
// (run with -race) and always return a candidate.
func TestConcurrentPipelines(t *testing.T) {
	prefix, err := picker.NewPrefixOverlap(picker.PrefixConfig{Capacity: 64})
	require.NoError(t, err)
	hash, err := picker.NewConsistentHash(picker.HashConfig{VirtualNodes: 8})
	require.NoError(t, err)
	pipes := []*picker.Pipeline{
		picker.Default(),
		{Filters: []picker.Filter{picker.DropOverloaded{}}, Scorers: []picker.Weighted{{Scorer: prefix, Weight: 2}, {Scorer: picker.LeastInFlight{}, Weight: 1}}},
		{Scorers: []picker.Weighted{{Scorer: picker.LeastBound{}, Weight: 1}}, Picker: prefix},
		{Picker: hash},
	}
	var g errgroup.Group
	for gi := range 8 {
		g.Go(func() error {
			for i := range 200 {
				cs := make([]picker.Candidate, 1+(gi+i)%5)
				for j := range cs {
					cs[j] = picker.Candidate{Target: affinity.WorkerOnly(fmt.Sprint("w", (j+i)%7)), InFlight: (i * j) % 5, Bound: j}
				}
				r := &picker.Request{Blocks: []uint64{uint64(i % 3), uint64(i % 11)}}
				if i%2 == 0 {
					r.Key = key(t, fmt.Sprint("s", i%13))
				}
				p := pipes[(gi+i)%len(pipes)]
				c, err := p.Pick(r, cs)
				if err != nil {
					return err
				}
				p.Observe(r, c.Target, placement.Accepted)
				if i%50 == 0 {
					prefix.ForgetWorker(c.Target.Worker)
					hash.Forget(c.Target)
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

// TestDeterministic: the same seeds and the same sequence of calls give
// the same picks, keyless ties and ring draws included.
func TestDeterministic(t *testing.T) {
	run := func() []string {
		prefix, err := picker.NewPrefixOverlap(picker.PrefixConfig{Seed: 5})
		require.NoError(t, err)
		hash, err := picker.NewConsistentHash(picker.HashConfig{Seed: 5})
		require.NoError(t, err)
		pipes := []*picker.Pipeline{{Seed: 5}, {Picker: prefix}, {Picker: hash}}
		var out []string
		for i := range 300 {
			cs := []picker.Candidate{cand("a", i%3, 0), cand("b", 0, 0), cand("c", 1, i%2)}
			r := &picker.Request{Blocks: []uint64{uint64(i % 4)}}
			if i%3 == 0 {
				r.Blocks = nil
			}
			p := pipes[i%3]
			c, err := p.Pick(r, cs)
			require.NoError(t, err)
			p.Observe(r, c.Target, placement.Accepted)
			out = append(out, c.Target.Worker)
		}
		return out
	}
	assert.Equal(t, run(), run())
}

// TestNoGoroutines: the package starts no goroutine: after picks and
// observations the count settles back.
func TestNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	prefix, err := picker.NewPrefixOverlap(picker.PrefixConfig{})
	require.NoError(t, err)
	p := &picker.Pipeline{Scorers: []picker.Weighted{{Scorer: prefix, Weight: 1}}, Picker: prefix}
	for i := range 100 {
		r := &picker.Request{Blocks: []uint64{uint64(i)}}
		c, err := p.Pick(r, []picker.Candidate{cand("a", 0, 0), cand("b", 1, 0)})
		require.NoError(t, err)
		p.Observe(r, c.Target, placement.Accepted)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before)
}
