package etcdstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/placementlab/placement/impl/claims"
)

// BenchmarkOps measures the store's calls on the shared in-process
// one-member etcd (loopback, no fsync): what a call costs in round trips
// more than what a real deployment's network would.
func BenchmarkOps(b *testing.B) {
	ctx := context.Background()
	cli, err := shared.NewClient()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	s, err := New(ctx, cli, "bench", claims.Options{IdleTTL: time.Minute, Prefix: fmt.Sprintf("bench%d/", time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown()
	if _, err := s.Register(ctx, "w", "1"); err != nil {
		b.Fatal(err)
	}
	hit, _, err := s.CreateOrGet(ctx, "hit", to("w"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("CreateOrGet/existing", func(b *testing.B) {
		for b.Loop() {
			if _, created, err := s.CreateOrGet(ctx, "hit", to("w")); err != nil || created {
				b.Fatal(err, created)
			}
		}
	})
	b.Run("CreateOrGet/new+Close", func(b *testing.B) {
		i := 0
		for b.Loop() {
			key := fmt.Sprintf("new-%d", i)
			i++
			c, created, err := s.CreateOrGet(ctx, key, to("w"))
			if err != nil || !created {
				b.Fatal(err, created)
			}
			if _, err := s.Close(ctx, key, c.Rev, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Hold+Unhold", func(b *testing.B) {
		for b.Loop() {
			if err := s.Hold(ctx, "hit", hit.Rev, "bench"); err != nil {
				b.Fatal(err)
			}
			if err := s.Unhold(ctx, "hit", "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	if _, err := s.Register(ctx, "w2", "1"); err != nil {
		b.Fatal(err)
	}
	b.Run("Move", func(b *testing.B) {
		cur, _, err := s.CreateOrGet(ctx, "moved", to("w"))
		if err != nil {
			b.Fatal(err)
		}
		targets := []claims.Target{{Worker: "w2"}, {Worker: "w"}}
		i := 0
		for b.Loop() {
			if cur, err = s.Move(ctx, "moved", cur.Rev, targets[i%2]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("Touch", func(b *testing.B) {
		for b.Loop() {
			if err := s.Touch(ctx, "hit", hit.Rev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
