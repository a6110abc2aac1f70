//go:build linux

package dirstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/dirstore"
	"github.com/placementlab/placement/internal/childproc"
)

// The helper-process pattern: the test binary re-executed with
// DIRSTORE_CHILD set runs one replica process's part and exits.
const childEnv = "DIRSTORE_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(child(role))
	}
	os.Exit(m.Run())
}

// line is what a child prints, one JSON object a line.
type line struct {
	Say     string       `json:"say,omitempty"`
	Key     string       `json:"key,omitempty"`
	Claim   claims.Claim `json:"claim"`
	Created bool         `json:"created,omitempty"`
	Read    bool         `json:"read,omitempty"`
	Event   claims.Event `json:"event"`
	Err     string       `json:"err,omitempty"`
}

func child(role string) int {
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	say := func(l line) {
		mu.Lock()
		defer mu.Unlock()
		_ = out.Encode(l)
	}
	fail := func(err error) int {
		say(line{Err: err.Error()})
		return 1
	}
	ctx := context.Background()
	s, err := dirstore.Open(dirstore.Config{
		Dir: os.Getenv("DIRSTORE_DIR"), IdleTTL: time.Minute, SweepEvery: 20 * time.Millisecond,
		PollEvery: time.Hour, // wake-ups come from inotify alone
	}, "child-"+os.Getenv("DIRSTORE_INDEX"))
	if err != nil {
		return fail(err)
	}
	switch role {
	case "race":
		idx, _ := strconv.Atoi(os.Getenv("DIRSTORE_INDEX"))
		keys, _ := strconv.Atoi(os.Getenv("DIRSTORE_KEYS"))
		seed, _ := strconv.ParseUint(os.Getenv("DIRSTORE_SEED"), 10, 64)
		say(line{Say: "ready"})
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fail(err)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(idx*10+g)))
				for _, k := range rng.Perm(keys) {
					key := fmt.Sprintf("key-%d", k)
					c, created, err := s.CreateOrGet(ctx, key, func() (claims.Target, error) {
						return claims.Target{Worker: fmt.Sprintf("w%d", (idx+g)%3), Rank: idx*10 + g, HasRank: true}, nil
					})
					if err != nil {
						say(line{Err: err.Error()})
						return
					}
					say(line{Key: key, Claim: c, Created: created})
				}
			}()
		}
		wg.Wait()
		for k := range keys {
			key := fmt.Sprintf("key-%d", k)
			c, ok, err := s.Get(ctx, key)
			if err != nil {
				return fail(err)
			}
			say(line{Key: key, Claim: c, Read: ok})
		}
		if err := s.Shutdown(); err != nil {
			return fail(err)
		}
		say(line{Say: "done"})
		return 0
	case "holder":
		rev, _ := strconv.ParseInt(os.Getenv("DIRSTORE_REV"), 10, 64)
		if err := s.Hold(ctx, os.Getenv("DIRSTORE_KEY"), rev, "child"); err != nil {
			return fail(err)
		}
		if _, err := s.Register(ctx, "child-worker", "1"); err != nil {
			return fail(err)
		}
		ch, err := s.Events(ctx)
		if err != nil {
			return fail(err)
		}
		say(line{Say: "held"})
		for ev := range ch {
			say(line{Event: ev})
		}
		return 0 // killed before this
	}
	return fail(fmt.Errorf("unknown role %q", role))
}

// proc is a running child.
type proc struct{ *childproc.Proc[line] }

func spawn(t *testing.T, role string, env ...string) *proc {
	t.Helper()
	unparsable := func(text string) line { return line{Err: "unparsable output: " + text} }
	return &proc{childproc.Start(t, unparsable, append([]string{childEnv + "=" + role}, env...)...)}
}

// next returns the child's next line, failing on its errors or after 10 s.
func (p *proc) next(t *testing.T) line {
	t.Helper()
	l := p.Next(t, 10*time.Second, "the child")
	require.Empty(t, l.Err, "the child failed")
	return l
}

// TestProcessesRaceCreateOrGet: N processes (4 goroutines each) race
// CreateOrGet on the same keys: each key has exactly one winner, and every
// process reads the same claim.
func TestProcessesRaceCreateOrGet(t *testing.T) {
	const procs, keys = 6, 12
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	parent, err := dirstore.Open(dirstore.Config{Dir: dir, IdleTTL: time.Minute}, "parent")
	require.NoError(t, err)
	defer parent.Shutdown()
	for w := range 3 {
		_, err := parent.Register(ctx, fmt.Sprintf("w%d", w), "1")
		require.NoError(t, err)
	}
	var ps []*proc
	for i := range procs {
		ps = append(ps, spawn(t, "race", "DIRSTORE_DIR="+dir, fmt.Sprintf("DIRSTORE_INDEX=%d", i),
			fmt.Sprintf("DIRSTORE_KEYS=%d", keys), fmt.Sprintf("DIRSTORE_SEED=%d", seed)))
	}
	for _, p := range ps {
		require.Equal(t, "ready", p.next(t).Say)
	}
	for _, p := range ps {
		_, err := io.WriteString(p.Stdin, "go\n")
		require.NoError(t, err)
	}
	winners := map[string][]claims.Claim{}
	returned := map[string][]claims.Claim{}
	read := map[string][]claims.Claim{}
	for _, p := range ps {
		for {
			l := p.next(t)
			if l.Say == "done" {
				break
			}
			switch {
			case l.Read:
				read[l.Key] = append(read[l.Key], l.Claim)
			case l.Created:
				winners[l.Key] = append(winners[l.Key], l.Claim)
				returned[l.Key] = append(returned[l.Key], l.Claim)
			default:
				returned[l.Key] = append(returned[l.Key], l.Claim)
			}
		}
		require.NoError(t, p.Cmd.Wait())
	}
	require.Len(t, returned, keys)
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		require.Len(t, winners[key], 1, "%s: exactly one creator across %d processes", key, procs)
		won := winners[key][0]
		require.Len(t, returned[key], procs*4)
		for _, c := range returned[key] {
			require.Equal(t, won, c, "%s: a racer got another claim than the winner's", key)
		}
		require.Len(t, read[key], procs)
		for _, c := range read[key] {
			require.Equal(t, won, c, "%s: a process reads another claim", key)
		}
		c, ok, err := parent.Get(ctx, key)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, won, c)
	}
	// Exited children's sessions were shut down, not left behind.
	ents, err := os.ReadDir(dir + "/sessions")
	require.NoError(t, err)
	require.Len(t, ents, 1, "only the parent's session remains")
}

// TestProcessKilled: a child process holds a claim and streams events; the
// parent's writes reach it; after SIGKILL its hold and registration
// vanish, so the parent's deferred close completes.
func TestProcessKilled(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	parent, err := dirstore.Open(dirstore.Config{
		Dir: dir, IdleTTL: time.Minute, SweepEvery: 20 * time.Millisecond, PollEvery: time.Hour,
	}, "parent")
	require.NoError(t, err)
	defer parent.Shutdown()
	evs, err := parent.Events(ctx)
	require.NoError(t, err)
	require.Equal(t, claims.Reset, (<-evs).Kind)
	_, err = parent.Register(ctx, "w", "1")
	require.NoError(t, err)
	require.Equal(t, claims.MembersChanged, (<-evs).Kind)
	c, _, err := parent.CreateOrGet(ctx, "s", func() (claims.Target, error) { return claims.Target{Worker: "w"}, nil })
	require.NoError(t, err)

	p := spawn(t, "holder", "DIRSTORE_DIR="+dir, "DIRSTORE_INDEX=0", "DIRSTORE_KEY=s", fmt.Sprintf("DIRSTORE_REV=%d", c.Rev))
	require.Equal(t, "held", p.next(t).Say)
	require.Equal(t, claims.Reset, p.next(t).Event.Kind, "the child's stream starts with a Reset")
	require.Equal(t, claims.MembersChanged, nextEvent(t, evs).Kind, "the child's registration")

	res, err := parent.Close(ctx, "s", c.Rev, "parent")
	require.NoError(t, err)
	require.Equal(t, claims.CloseDeferred, res, "the child holds it")
	closing, ok, err := parent.Get(ctx, "s")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, claims.Closing, closing.State)
	want := claims.Event{Kind: claims.Delete, Key: "s", Rev: c.Rev}
	require.Equal(t, want, nextEvent(t, evs))
	require.Equal(t, want, p.next(t).Event, "the parent's close reaches the child's stream")
	x, _, err := parent.CreateOrGet(ctx, "x", func() (claims.Target, error) { return claims.Target{Worker: "w"}, nil })
	require.NoError(t, err)
	_, err = parent.Close(ctx, "x", x.Rev, "parent")
	require.NoError(t, err)
	want = claims.Event{Kind: claims.Delete, Key: "x", Rev: x.Rev}
	require.Equal(t, want, nextEvent(t, evs))
	require.Equal(t, want, p.next(t).Event)

	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGKILL))
	_ = p.Cmd.Wait()
	// The parent's sweep sees the child's session dead: its hold goes, so
	// the Closing claim is deleted; its registration goes.
	got := map[claims.EventKind]claims.Event{}
	for len(got) < 2 {
		ev := nextEvent(t, evs)
		got[ev.Kind] = ev
	}
	require.Equal(t, claims.Event{Kind: claims.Delete, Key: "s", Rev: closing.Rev}, got[claims.Delete])
	require.Equal(t, "child-worker", got[claims.MembersChanged].Key)
	_, ok, err = parent.Get(ctx, "s")
	require.NoError(t, err)
	require.False(t, ok)
	ms, _, err := parent.Members(ctx)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, "w", ms[0].Worker)
	ents, err := os.ReadDir(dir + "/sessions")
	require.NoError(t, err)
	require.Len(t, ents, 1, "the dead session's file was removed")
}

func nextEvent(t *testing.T, ch <-chan claims.Event) claims.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "stream closed")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return claims.Event{}
}
