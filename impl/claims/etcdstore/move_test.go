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
