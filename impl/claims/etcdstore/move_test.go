package etcdstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/placementlab/placement/impl/claims"
)

// A Move judges the claim and the target's registration at one revision,
// and its write is fenced by both: when, between its read and its write,
// the target worker restarts (a new generation), the move is judged again
// and written under the new generation (not the one read, which would
// leave a claim stale from birth); when the target leaves, it is
// ErrUnknownWorker; when another replica moves the claim first, it is
// ErrClaimMoved with that replica's claim, and nothing is written.
func TestMoveJudgesOneMoment(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute)
	other := o.open("other")
	_, err := other.Register(ctx, "w0", "boot-1")
	require.NoError(t, err)
	_, err = other.Register(ctx, "w1", "boot-1")
	require.NoError(t, err)
	kv := &lossyKV{}
	a := o.openWrapped("a", func(cli *clientv3.Client) { kv.KV = cli.KV; cli.KV = kv })
	w1 := claims.Target{Worker: "w1"}

	// The target restarts in between: the new generation.
	c1, _, err := a.CreateOrGet(ctx, "k", to("w0"))
	require.NoError(t, err)
	var restarted claims.Member
	kv.beforeNext(func() {
		restarted, err = other.Register(ctx, "w1", "boot-2")
		require.NoError(t, err)
	})
	mv, err := a.Move(ctx, "k", c1.Rev, w1)
	require.NoError(t, err)
	require.NotZero(t, restarted.Gen, "the hook ran")
	require.Equal(t, restarted.Gen, mv.Gen, "written under the target's generation at the write")
	got, ok, err := other.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, mv, got)

	// The target leaves in between: ErrUnknownWorker, nothing written.
	kv.beforeNext(func() { require.NoError(t, other.Deregister(ctx, "w0")) })
	_, err = a.Move(ctx, "k", mv.Rev, claims.Target{Worker: "w0"})
	require.ErrorIs(t, err, claims.ErrUnknownWorker)
	got, _, err = other.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, mv, got)

	// Another replica moves the claim first: the loser learns its claim.
	_, err = other.Register(ctx, "w0", "boot-1")
	require.NoError(t, err)
	var won claims.Claim
	kv.beforeNext(func() {
		won, err = other.Move(ctx, "k", mv.Rev, claims.Target{Worker: "w0", Rank: 1, HasRank: true})
		require.NoError(t, err)
	})
	_, err = a.Move(ctx, "k", mv.Rev, claims.Target{Worker: "w0"})
	require.ErrorIs(t, err, claims.ErrClaimMoved)
	var me *claims.MoveError
	require.ErrorAs(t, err, &me)
	require.True(t, me.Found)
	require.Equal(t, won, me.Current, "the loser is told the winner's claim")
	got, _, err = other.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, won, got)
}

// A Close fenced by a revision writes the claim as it is at that
// revision. The store knows a held claim from its Hold and closes it
// without a read, but only at the revision the Hold read: after another
// replica moved the claim (a new revision, a new target), a deferred
// Close (another replica still holds it) rewrites the moved claim as
// Closing, not the one this store held before the move.
func TestCloseWritesTheClaimAtItsRevision(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	o := newOpener(t, shared, time.Minute)
	a, b := o.open("a"), o.open("b")
	for _, w := range []string{"w0", "w1"} {
		_, err := b.Register(ctx, w, "boot-1")
		require.NoError(t, err)
	}
	c1, created, err := a.CreateOrGet(ctx, "kc", to("w0"))
	require.NoError(t, err)
	require.True(t, created)
	require.NoError(t, a.Hold(ctx, "kc", c1.Rev, "a"))
	mv, err := b.Move(ctx, "kc", c1.Rev, claims.Target{Worker: "w1"})
	require.NoError(t, err)
	require.NoError(t, b.Hold(ctx, "kc", mv.Rev, "b"))
	res, err := a.Close(ctx, "kc", mv.Rev, "a")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res, "b still holds it")
	got, ok, err := b.Get(ctx, "kc")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, claims.Closing, got.State)
	require.Equal(t, mv.Target, got.Target, "the moved claim is the one closing")
	require.Equal(t, mv.Gen, got.Gen)

	// Closed by the revision its own Hold read (no read of its own).
	c2, _, err := a.CreateOrGet(ctx, "kd", to("w0"))
	require.NoError(t, err)
	require.NoError(t, a.Hold(ctx, "kd", c2.Rev, "a"))
	require.NoError(t, b.Hold(ctx, "kd", c2.Rev, "b"))
	res, err = a.Close(ctx, "kd", c2.Rev, "a")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res)
	got, _, err = b.Get(ctx, "kd")
	require.NoError(t, err)
	require.Equal(t, claims.Closing, got.State)
	require.Equal(t, c2.Target, got.Target)
}
