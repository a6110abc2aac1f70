//go:build linux

package replica

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/dirstore"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/internal/childproc"
)

// Replicas as separate processes on a shared directory (dirstore): the
// test binary re-executed with childEnv set runs one replica and exits
// (the helper-process pattern of impl/claims/dirstore's process_test.go).
const childEnv = "REPLICA_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(replicaProcess())
	}
	os.Exit(m.Run())
}

// procLine is what a replica process prints, one JSON object a line.
type procLine struct {
	Say     string        `json:"say,omitempty"`
	Key     string        `json:"key,omitempty"`
	Target  claims.Target `json:"target"`
	Rev     int64         `json:"rev,omitempty"`
	Hit     bool          `json:"hit,omitempty"`
	Creates int           `json:"creates,omitempty"`
	Stats   *Stats        `json:"stats,omitempty"`
	Err     string        `json:"err,omitempty"`
}

// replicaProcess is one replica process: it runs turns of the sessions
// when told "go", prints what each saw and its stats, and then waits for
// "exit" (a clean shutdown) or to be killed.
func replicaProcess() int {
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	say := func(l procLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = out.Encode(l)
	}
	fail := func(err error) int {
		say(procLine{Err: err.Error()})
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := "proc-" + os.Getenv("REPLICA_INDEX")
	s, err := dirstore.Open(dirstore.Config{Dir: os.Getenv("REPLICA_DIR"), IdleTTL: time.Minute,
		SweepEvery: 20 * time.Millisecond, PollEvery: 20 * time.Millisecond}, name)
	if err != nil {
		return fail(err)
	}
	cs := newCounting(s)
	c, err := New(ctx, Config{Store: cs, Name: name, IdleTTL: time.Minute})
	if err != nil {
		return fail(err)
	}
	sessions, _ := strconv.Atoi(os.Getenv("REPLICA_SESSIONS"))
	idx, _ := strconv.Atoi(os.Getenv("REPLICA_INDEX"))
	seed, _ := strconv.ParseUint(os.Getenv("REPLICA_SEED"), 10, 64)
	in := bufio.NewReader(os.Stdin)
	say(procLine{Say: "ready"})
	if _, err := in.ReadString('\n'); err != nil {
		return fail(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(idx*10+g)))
			for range 2 {
				for _, k := range rng.Perm(sessions) {
					key := fmt.Sprintf("s%d", k)
					tu, err := c.Start(ctx, key, func(ms []claims.Member, _ []claims.Target) (claims.Target, error) {
						return claims.Target{Worker: ms[(idx+g)%len(ms)].Worker}, nil
					})
					if err != nil {
						errs <- err
						return
					}
					l := procLine{Key: key, Target: tu.Target(), Rev: tu.Rev(), Hit: tu.Hit()}
					if err := tu.Complete(placement.Accepted); err != nil {
						errs <- err
						return
					}
					tu.Done(false)
					say(l)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return fail(err)
	}
	st := c.Stats()
	say(procLine{Say: "done", Stats: &st, Creates: cs.n("CreateOrGet")})
	if _, err := in.ReadString('\n'); err != nil {
		return fail(err)
	}
	_ = c.Close()
	if err := s.Shutdown(); err != nil {
		return fail(err)
	}
	say(procLine{Say: "bye"})
	return 0
}

// replicaProc is a running replica process.
type replicaProc struct{ *childproc.Proc[procLine] }

func spawnReplica(t *testing.T, env ...string) *replicaProc {
	t.Helper()
	unparsable := func(text string) procLine { return procLine{Err: "unparsable output: " + text} }
	return &replicaProc{childproc.Start(t, unparsable, append([]string{childEnv + "=1"}, env...)...)}
}

// next returns the process's next line, failing on its errors or after
// 20 s.
func (p *replicaProc) next(t *testing.T) procLine {
	t.Helper()
	l := p.Next(t, 20*time.Second, "the replica process")
	require.Empty(t, l.Err, "the replica process failed")
	return l
}

// TestProcesses_ReplicasAgreeOnDirectory: three replica processes on one
// shared directory, four goroutines each, each proposing a different
// worker, run turns of the same sessions: every turn of a session in every
// process goes to its claim's target at its revision, each process reads
// each claim once, and one process wrote each claim. Then one process is
// killed and the others exit cleanly: a close of every session completes
// once the killed process's holds vanish with its session.
func TestProcesses_ReplicasAgreeOnDirectory(t *testing.T) {
	const procs, sessions = 3, 8
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	parent, err := dirstore.Open(dirstore.Config{Dir: dir, IdleTTL: time.Minute, SweepEvery: 20 * time.Millisecond,
		PollEvery: 20 * time.Millisecond}, "parent")
	require.NoError(t, err)
	defer parent.Shutdown()
	for w := range 3 {
		_, err := parent.Register(ctx, fmt.Sprintf("w%d", w), "boot-1")
		require.NoError(t, err)
	}
	ps := make([]*replicaProc, procs)
	for i := range ps {
		ps[i] = spawnReplica(t, "REPLICA_DIR="+dir, fmt.Sprintf("REPLICA_INDEX=%d", i),
			fmt.Sprintf("REPLICA_SESSIONS=%d", sessions), fmt.Sprintf("REPLICA_SEED=%d", seed))
	}
	for _, p := range ps {
		require.Equal(t, "ready", p.next(t).Say)
	}
	for _, p := range ps {
		_, err := io.WriteString(p.Stdin, "go\n")
		require.NoError(t, err)
	}
	seen := map[string][]procLine{}
	created := uint64(0)
	for i, p := range ps {
		for {
			l := p.next(t)
			if l.Say == "done" {
				assert.Equal(t, sessions, l.Creates, "process %d: one claim read per session", i)
				assert.EqualValues(t, sessions, l.Stats.FirstTurns, "process %d", i)
				assert.EqualValues(t, 4*2*sessions-sessions, l.Stats.CachedTurns, "process %d", i)
				created += l.Stats.ClaimsCreated
				break
			}
			seen[l.Key] = append(seen[l.Key], l)
		}
	}
	assert.EqualValues(t, sessions, created, "one writer per session")
	require.Len(t, seen, sessions)
	revs := map[string]int64{}
	for key, ls := range seen {
		cl, ok, err := parent.Get(ctx, key)
		require.NoError(t, err)
		require.True(t, ok, key)
		revs[key] = cl.Rev
		require.Len(t, ls, procs*4*2)
		for _, l := range ls {
			require.Equal(t, cl.Target, l.Target, key)
			require.Equal(t, cl.Rev, l.Rev, key)
		}
	}

	// Process 0 crashes; the others exit cleanly (their holds go with
	// their Shutdown). The parent's close of each session is deferred
	// while the crashed process's hold is there, and completes when its
	// dead session is swept.
	require.NoError(t, ps[0].Cmd.Process.Signal(syscall.SIGKILL))
	_ = ps[0].Cmd.Wait()
	for _, p := range ps[1:] {
		_, err := io.WriteString(p.Stdin, "exit\n")
		require.NoError(t, err)
		require.Equal(t, "bye", p.next(t).Say)
		require.NoError(t, p.Cmd.Wait())
	}
	for key, rev := range revs {
		res, err := parent.Close(ctx, key, rev, "parent")
		require.NoError(t, err)
		require.NotEqual(t, claims.CloseStale, res, key)
	}
	require.Eventually(t, func() bool {
		for key := range revs {
			if _, ok, err := parent.Get(ctx, key); err != nil || ok {
				return false
			}
		}
		return true
	}, 15*time.Second, 20*time.Millisecond, "a crashed process's holds outlived it")
}
