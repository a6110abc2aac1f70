//go:build linux

package dirstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/placement"
)

// Defaults of Config's zero fields.
const (
	// DefaultPollEvery is how often a stream reads the journal besides
	// inotify's wake-ups.
	DefaultPollEvery = 250 * time.Millisecond
	// DefaultRescanEvery is how often a stream compares the claims
	// directory with the journal's state.
	DefaultRescanEvery = 5 * time.Second
	// DefaultEventBuffer bounds a stream's undelivered events; a stream
	// whose consumer falls further behind gets a Reset.
	DefaultEventBuffer = 4096
	// DefaultSegmentBytes is the journal segment size at which a new
	// segment starts.
	DefaultSegmentBytes = 1 << 20
	// keepSegments is how many journal segments are kept; a stream more
	// than that behind gets a Reset.
	keepSegments = 4
)

// Config configures a handle on a directory. Every process sharing a
// directory must use the same IdleTTL and the wall clock.
type Config struct {
	// Dir is the shared directory (created if missing).
	Dir string
	// IdleTTL is a claim's idle time-to-live; zero means
	// claims.DefaultIdleTTL.
	IdleTTL time.Duration
	// Clock is a manual clock for deadlines (tests in one process); nil
	// means the wall clock.
	Clock *placement.ManualClock
	// SweepEvery is how often the handle deletes expired claims and
	// cleans up dead sessions; zero means IdleTTL/20 within [10ms, 1s];
	// negative means never (call Sweep).
	SweepEvery time.Duration
	// PollEvery, RescanEvery, EventBuffer and SegmentBytes: zero means
	// DefaultPollEvery, DefaultRescanEvery, DefaultEventBuffer and
	// DefaultSegmentBytes.
	PollEvery    time.Duration
	RescanEvery  time.Duration
	EventBuffer  int
	SegmentBytes int64
}

// Store is one handle on a shared directory: one store session of one
// replica. It implements claims.Store.
type Store struct {
	cfg     Config
	dir     string
	replica string
	session string
	ttl     time.Duration

	opMu     sync.Mutex // serializes this handle's flock on lockFile
	lockFile *os.File
	sessFile *os.File

	mu     sync.Mutex // guards the fields below
	closed bool
	subs   map[*sub]struct{}
	watch  *watcher
	poke   chan struct{} // wakes the watcher after a local write

	stop chan struct{}
	wg   sync.WaitGroup
}

var _ claims.Store = (*Store)(nil)

func (s *Store) path(parts ...string) string {
	return filepath.Join(append([]string{s.dir}, parts...)...)
}

// Open opens a handle (a new store session) of replica on cfg.Dir,
// creating the directory's layout if missing.
func Open(cfg Config, replica string) (*Store, error) {
	if cfg.Dir == "" {
		return nil, invalid("open", "empty Dir")
	}
	if replica == "" {
		return nil, invalid("open", "empty replica")
	}
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = claims.DefaultIdleTTL
	}
	if cfg.SweepEvery == 0 {
		cfg.SweepEvery = min(max(cfg.IdleTTL/20, 10*time.Millisecond), time.Second)
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	if cfg.RescanEvery <= 0 {
		cfg.RescanEvery = DefaultRescanEvery
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = DefaultEventBuffer
	}
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = DefaultSegmentBytes
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, unavailable("open", err)
	}
	for _, sub := range []string{"claims", "holds", "members", "sessions", "journal"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, unavailable("open", err)
		}
	}
	id, err := newSessionID()
	if err != nil {
		return nil, unavailable("open", err)
	}
	s := &Store{
		cfg: cfg, dir: dir, replica: replica, session: id, ttl: cfg.IdleTTL,
		subs: map[*sub]struct{}{},
		poke: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}
	s.lockFile, err = os.OpenFile(s.path("lock"), os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, unavailable("open", err)
	}
	// The session file is locked before it appears under its name, so a
	// liveness check never sees it unlocked while its owner lives.
	tmp := s.path("sessions", "."+id+".tmp")
	s.sessFile, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o644)
	if err == nil {
		err = syscall.Flock(int(s.sessFile.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err == nil {
		_, err = fmt.Fprintf(s.sessFile, "%d %s\n", os.Getpid(), replica)
	}
	if err == nil {
		err = os.Rename(tmp, s.path("sessions", id))
	}
	if err != nil {
		if s.sessFile != nil {
			_ = s.sessFile.Close()
		}
		_ = os.Remove(tmp)
		_ = s.lockFile.Close()
		return nil, unavailable("open", err)
	}
	if cfg.SweepEvery > 0 {
		s.wg.Add(1)
		go s.sweeper()
	}
	return s, nil
}

// Session returns the handle's session id (its liveness file's name).
func (s *Store) Session() string { return s.session }

func (s *Store) now() int64 {
	if s.cfg.Clock != nil {
		return int64(s.cfg.Clock.Now())
	}
	return time.Now().UnixNano()
}

func (s *Store) sweeper() {
	defer s.wg.Done()
	tk := time.NewTicker(s.cfg.SweepEvery)
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = s.Sweep(ctx)
			cancel()
		}
	}
}

// tx is one operation under the store's lock.
type tx struct {
	s     *Store
	op    string
	now   int64
	alive map[string]bool // sessions checked in this operation
	wrote bool
}

// run runs f under the store's lock, with ctx's cancellation and the
// handle's state checked first.
func (s *Store) run(ctx context.Context, op string, f func(t *tx) error) error {
	if ctx == nil {
		return invalid(op, "nil context")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if s.isClosed() {
		return fmt.Errorf("dirstore: %s: %w", op, claims.ErrClosed)
	}
	if err := flockCtx(ctx, s.lockFile, syscall.LOCK_EX); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return unavailable(op, err)
	}
	t := &tx{s: s, op: op, now: s.now(), alive: map[string]bool{s.session: true}}
	err := f(t)
	funlock(s.lockFile)
	if t.wrote {
		select {
		case s.poke <- struct{}{}:
		default:
		}
	}
	return err
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// fail wraps a file-system error.
func (t *tx) fail(err error) error {
	if err == nil {
		return nil
	}
	var ue *claims.UnavailableError
	if errors.As(err, &ue) {
		return err
	}
	return unavailable(t.op, err)
}

// nextRev increments the revision counter and returns the new revision.
func (t *tx) nextRev() (int64, error) {
	p := t.s.path("rev")
	rev, err := readCounter(p)
	if err != nil {
		return 0, err
	}
	rev++
	return rev, writeCounter(p, rev)
}

// journal appends r (its revision already taken) to the journal.
func (t *tx) journal(r record) error {
	t.wrote = true
	dir := t.s.path("journal")
	segs, err := segments(dir)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		segs = []string{segmentName(r.Rev)}
	}
	last := filepath.Join(dir, segs[len(segs)-1])
	f, err := os.OpenFile(last, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	if size := st.Size(); size > 0 {
		// A writer that crashed mid-record left a partial line: end it
		// (readers see a corrupt record and Reset).
		var b [1]byte
		if _, err := f.ReadAt(b[:], size-1); err != nil {
			return err
		}
		if b[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	if _, err := f.Write(line); err != nil {
		return err
	}
	if st.Size()+int64(len(line)) < t.s.cfg.SegmentBytes {
		return nil
	}
	// Start the next segment; drop the oldest beyond keepSegments.
	next := filepath.Join(dir, segmentName(r.Rev+1))
	nf, err := os.OpenFile(next, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	_ = nf.Close()
	segs = append(segs, segmentName(r.Rev+1))
	for len(segs) > keepSegments {
		_ = os.Remove(filepath.Join(dir, segs[0]))
		segs = segs[1:]
	}
	return nil
}

// isAlive reports whether session's owner lives (holds its liveness lock).
func (t *tx) isAlive(session string) (bool, error) {
	if v, ok := t.alive[session]; ok {
		return v, nil
	}
	alive, err := sessionAlive(t.s.path("sessions", session))
	if err != nil {
		return false, err
	}
	t.alive[session] = alive
	return alive, nil
}

func sessionAlive(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	funlock(f)
	return false, nil
}

// claim reads key's claim, applying its expiry; nil when it has none.
func (t *tx) claim(key string) (*claimFile, error) {
	var c claimFile
	ok, err := readJSON(t.s.path("claims", encode(key)), &c)
	if err != nil || !ok {
		return nil, err
	}
	if string(c.Key) != key {
		return nil, fmt.Errorf("dirstore: claim file of %q holds key %q", key, c.Key)
	}
	if t.now >= c.Deadline {
		return nil, t.deleteClaim(&c)
	}
	return &c, nil
}

// writeClaim writes c at a new revision, ending prev (0: none), with a
// fresh idle deadline. c's Born zero starts a new lineage (Born = the new
// revision); a rewrite keeps c.Born.
func (t *tx) writeClaim(c claims.Claim, prev int64) (claims.Claim, error) {
	rev, err := t.nextRev()
	if err != nil {
		return claims.Claim{}, err
	}
	c.Rev = rev
	if c.Born == 0 {
		c.Born = rev
	}
	f := fromClaim(c)
	f.Deadline = t.now + int64(t.s.ttl)
	data, err := json.Marshal(f)
	if err != nil {
		return claims.Claim{}, err
	}
	if err := writeAtomic(t.s.path("claims", encode(c.Key)), data); err != nil {
		return claims.Claim{}, err
	}
	return c, t.journal(record{Rev: rev, Op: opClaim, Key: rawKey(c.Key), Ended: prev})
}

// deleteClaim deletes c and its lineage's holds.
func (t *tx) deleteClaim(c *claimFile) error {
	rev, err := t.nextRev()
	if err != nil {
		return err
	}
	if err := os.Remove(t.s.path("claims", encode(string(c.Key)))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := t.dropHolds(string(c.Key)); err != nil {
		return err
	}
	return t.journal(record{Rev: rev, Op: opDelete, Key: c.Key, Ended: c.Rev})
}

// dropHolds removes every hold on key (its lineage ended).
func (t *tx) dropHolds(key string) error {
	return os.RemoveAll(t.s.path("holds", encode(key)))
}

// holdName is the file name of replica's hold in session.
func holdName(replica, session string) string { return encode(replica) + "@" + session }

// liveHolders returns the hold files on key whose sessions live,
// removing the dead ones'.
func (t *tx) liveHolders(key string) ([]string, error) {
	dir := t.s.path("holds", encode(key))
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var live []string
	for _, e := range ents {
		name := e.Name()
		i := strings.LastIndexByte(name, '@')
		if i < 0 {
			continue
		}
		ok, err := t.isAlive(name[i+1:])
		if err != nil {
			return nil, err
		}
		if !ok {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		live = append(live, name)
	}
	return live, nil
}

// removeHold removes replica's holds on key (any session's); deleted
// reports whether one existed.
func (t *tx) removeHold(key, replica string) (bool, error) {
	dir := t.s.path("holds", encode(key))
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	prefix := encode(replica) + "@"
	found := false
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return found, err
			}
			found = true
		}
	}
	return found, nil
}

// closeIfReleased deletes c if it is Closing and no live replica holds it.
func (t *tx) closeIfReleased(c *claimFile) error {
	if c.State != claims.Closing {
		return nil
	}
	live, err := t.liveHolders(string(c.Key))
	if err != nil || len(live) > 0 {
		return err
	}
	return t.deleteClaim(c)
}

// member reads worker's registration, dropping it if its session died.
func (t *tx) member(worker string) (*memberFile, error) {
	var m memberFile
	ok, err := readJSON(t.s.path("members", encode(worker)), &m)
	if err != nil || !ok {
		return nil, err
	}
	alive, err := t.isAlive(m.Session)
	if err != nil {
		return nil, err
	}
	if !alive {
		return nil, t.removeMember(worker)
	}
	return &m, nil
}

func (t *tx) removeMember(worker string) error {
	rev, err := t.nextRev()
	if err != nil {
		return err
	}
	if err := os.Remove(t.s.path("members", encode(worker))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return t.journal(record{Rev: rev, Op: opMember, Key: rawKey(worker)})
}

// stale reports whether c's worker is gone or has another generation.
func (t *tx) stale(c *claimFile) (bool, error) {
	m, err := t.member(c.Worker)
	if err != nil {
		return false, err
	}
	return m == nil || m.Gen != c.Gen, nil
}

// CreateOrGet implements claims.Store.
func (s *Store) CreateOrGet(ctx context.Context, key string, propose func() (claims.Target, error)) (claims.Claim, bool, error) {
	const op = "create-or-get"
	if err := claims.CheckCreateOrGet(key, propose); err != nil {
		return claims.Claim{}, false, err
	}
	for {
		var seen int64
		var cur claims.Claim
		found := false
		err := s.run(ctx, op, func(t *tx) error {
			c, err := t.claim(key)
			if err != nil || c == nil {
				return t.fail(err)
			}
			stale, err := t.stale(c)
			if err != nil {
				return t.fail(err)
			}
			if !stale {
				cur, found = c.claim(), true
			}
			seen = c.Rev
			return nil
		})
		if err != nil {
			return claims.Claim{}, false, err
		}
		if found {
			return cur, false, nil
		}
		target, err := propose()
		if err != nil {
			return claims.Claim{}, false, err
		}
		if err := claims.CheckProposal(target); err != nil {
			return claims.Claim{}, false, err
		}
		var out claims.Claim
		lost := false
		err = s.run(ctx, op, func(t *tx) error {
			c, err := t.claim(key)
			if err != nil {
				return t.fail(err)
			}
			var now int64
			if c != nil {
				now = c.Rev
			}
			if now != seen {
				lost = true
				return nil
			}
			m, err := t.member(target.Worker)
			if err != nil {
				return t.fail(err)
			}
			if m == nil {
				return fmt.Errorf("dirstore: %s %q: proposed worker %q: %w", op, key, target.Worker, claims.ErrUnknownWorker)
			}
			if c != nil {
				// The stale claim's lineage ends with its holds.
				if err := t.dropHolds(key); err != nil {
					return t.fail(err)
				}
			}
			out, err = t.writeClaim(claims.Claim{Key: key, Target: target, Gen: m.Gen, State: claims.Bound}, seen)
			return t.fail(err)
		})
		if err != nil {
			return claims.Claim{}, false, err
		}
		if !lost {
			return out, true, nil
		}
	}
}

// Get implements claims.Store.
func (s *Store) Get(ctx context.Context, key string) (claims.Claim, bool, error) {
	if err := claims.CheckGet(key); err != nil {
		return claims.Claim{}, false, err
	}
	var out claims.Claim
	found := false
	err := s.run(ctx, "get", func(t *tx) error {
		c, err := t.claim(key)
		if err != nil || c == nil {
			return t.fail(err)
		}
		out, found = c.claim(), true
		return nil
	})
	return out, found, err
}

// current reads key's claim and checks its revision is rev.
func (t *tx) current(key string, rev int64) (*claimFile, error) {
	c, err := t.claim(key)
	if err != nil {
		return nil, t.fail(err)
	}
	if c == nil {
		return nil, fmt.Errorf("dirstore: %s %q rev %d: no claim: %w", t.op, key, rev, claims.ErrClaimMoved)
	}
	if c.Rev != rev {
		return nil, fmt.Errorf("dirstore: %s %q rev %d: current rev is %d: %w", t.op, key, rev, c.Rev, claims.ErrClaimMoved)
	}
	return c, nil
}

// lineage reads key's claim and checks rev is a revision of its lineage
// (Born <= rev <= Rev).
func (t *tx) lineage(key string, rev int64) (*claimFile, error) {
	c, err := t.claim(key)
	if err != nil {
		return nil, t.fail(err)
	}
	if c == nil {
		return nil, fmt.Errorf("dirstore: %s %q rev %d: no claim: %w", t.op, key, rev, claims.ErrClaimMoved)
	}
	if cl := c.claim(); !cl.InLineage(rev) {
		return nil, fmt.Errorf("dirstore: %s %q rev %d: not in the current lineage [%d, %d]: %w", t.op, key, rev, cl.Born, cl.Rev, claims.ErrClaimMoved)
	}
	return c, nil
}

// Hold implements claims.Store.
func (s *Store) Hold(ctx context.Context, key string, rev int64, replica string) error {
	if err := claims.CheckHold(key, rev, replica); err != nil {
		return err
	}
	return s.run(ctx, "hold", func(t *tx) error {
		if _, err := t.current(key, rev); err != nil {
			return err
		}
		if _, err := t.removeHold(key, replica); err != nil {
			return t.fail(err)
		}
		dir := s.path("holds", encode(key))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return t.fail(err)
		}
		return t.fail(os.WriteFile(filepath.Join(dir, holdName(replica, s.session)), nil, 0o644))
	})
}

// Unhold implements claims.Store.
func (s *Store) Unhold(ctx context.Context, key string, replica string) error {
	if err := claims.CheckUnhold(key, replica); err != nil {
		return err
	}
	return s.run(ctx, "unhold", func(t *tx) error {
		found, err := t.removeHold(key, replica)
		if err != nil || !found {
			return t.fail(err)
		}
		c, err := t.claim(key)
		if err != nil || c == nil {
			return t.fail(err)
		}
		return t.fail(t.closeIfReleased(c))
	})
}

// Close implements claims.Store.
func (s *Store) Close(ctx context.Context, key string, rev int64, replica string) (claims.CloseResult, error) {
	if err := claims.CheckClose(key, rev, replica); err != nil {
		return 0, err
	}
	var res claims.CloseResult
	err := s.run(ctx, "close", func(t *tx) error {
		c, err := t.claim(key)
		if err != nil {
			return t.fail(err)
		}
		if c == nil || c.Rev != rev {
			res = claims.CloseStale
			return nil
		}
		if _, err := t.removeHold(key, replica); err != nil {
			return t.fail(err)
		}
		live, err := t.liveHolders(key)
		if err != nil {
			return t.fail(err)
		}
		if len(live) == 0 {
			res = claims.CloseDeleted
			return t.fail(t.deleteClaim(c))
		}
		res = claims.CloseDeferred
		if c.State == claims.Closing {
			return nil
		}
		n := c.claim()
		n.State, n.Attempt = claims.Closing, 0
		_, err = t.writeClaim(n, c.Rev)
		return t.fail(err)
	})
	return res, err
}

// Quarantine implements claims.Store.
func (s *Store) Quarantine(ctx context.Context, key string, rev int64, attempt uint64, gen int64) (claims.Claim, error) {
	const op = "quarantine"
	if err := claims.CheckQuarantine(key, rev, gen); err != nil {
		return claims.Claim{}, err
	}
	var out claims.Claim
	err := s.run(ctx, op, func(t *tx) error {
		c, err := t.current(key, rev)
		if err != nil {
			return err
		}
		if c.Gen != gen {
			return fmt.Errorf("dirstore: %s %q rev %d: generation %d is not the claim's %d: %w", op, key, rev, gen, c.Gen, claims.ErrClaimMoved)
		}
		n := c.claim()
		n.State, n.Attempt = claims.Quarantined, attempt
		out, err = t.writeClaim(n, c.Rev)
		return t.fail(err)
	})
	return out, err
}

// Resolve implements claims.Store.
func (s *Store) Resolve(ctx context.Context, key string, attempt uint64, gen int64, accepted bool) (claims.Claim, bool, error) {
	if err := claims.CheckResolve(key, gen); err != nil {
		return claims.Claim{}, false, err
	}
	var out claims.Claim
	ok := false
	err := s.run(ctx, "resolve", func(t *tx) error {
		c, err := t.claim(key)
		if err != nil {
			return t.fail(err)
		}
		if c == nil {
			return &claims.FencedError{Key: key, Attempt: attempt, Gen: gen}
		}
		if c.State != claims.Quarantined || c.Attempt != attempt || c.Gen != gen {
			return &claims.FencedError{Key: key, Attempt: attempt, Gen: gen, Current: c.claim(), Found: true}
		}
		stale, err := t.stale(c)
		if err != nil {
			return t.fail(err)
		}
		if stale {
			// The worker re-registered or left: nothing settles a
			// stale claim (CreateOrGet replaces it).
			return &claims.FencedError{Key: key, Attempt: attempt, Gen: gen, Current: c.claim(), Found: true, Stale: true}
		}
		if !accepted {
			return t.fail(t.deleteClaim(c))
		}
		n := c.claim()
		n.State, n.Attempt = claims.Bound, 0
		out, err = t.writeClaim(n, c.Rev)
		ok = err == nil
		return t.fail(err)
	})
	return out, ok, err
}

// Move implements claims.Store: under the directory's lock, the claim is
// read and checked (current at rev, Bound), the target's registration
// read, the old lineage's holds dropped and the new lineage written (the
// journal records the end of rev: every stream's Delete event).
func (s *Store) Move(ctx context.Context, key string, rev int64, target claims.Target) (claims.Claim, error) {
	const op = "move"
	if err := claims.CheckMove(key, rev, target); err != nil {
		return claims.Claim{}, err
	}
	var out claims.Claim
	err := s.run(ctx, op, func(t *tx) error {
		c, err := t.claim(key)
		if err != nil {
			return t.fail(err)
		}
		switch {
		case c == nil:
			return &claims.MoveError{Key: key, Rev: rev, Target: target}
		case c.Rev != rev, c.State != claims.Bound:
			return &claims.MoveError{Key: key, Rev: rev, Target: target, Current: c.claim(), Found: true}
		}
		m, err := t.member(target.Worker)
		if err != nil {
			return t.fail(err)
		}
		if m == nil {
			return fmt.Errorf("dirstore: %s %q rev %d: target worker %q: %w", op, key, rev, target.Worker, claims.ErrUnknownWorker)
		}
		// The old lineage ends with its holds; Born zero starts a new one.
		if err := t.dropHolds(key); err != nil {
			return t.fail(err)
		}
		out, err = t.writeClaim(claims.Claim{Key: key, Target: target, Gen: m.Gen, State: claims.Bound}, c.Rev)
		return t.fail(err)
	})
	return out, err
}

// Touch implements claims.Store.
func (s *Store) Touch(ctx context.Context, key string, rev int64) error {
	if err := claims.CheckTouch(key, rev); err != nil {
		return err
	}
	return s.run(ctx, "touch", func(t *tx) error {
		c, err := t.lineage(key, rev)
		if err != nil {
			return err
		}
		c.Deadline = t.now + int64(s.ttl)
		data, err := json.Marshal(c)
		if err != nil {
			return t.fail(err)
		}
		return t.fail(writeAtomic(s.path("claims", encode(key)), data))
	})
}

// Register implements claims.Store: a registration with the identity of
// worker's current (live) one returns it and writes nothing; it stays
// with the session that made it.
func (s *Store) Register(ctx context.Context, worker, identity string) (claims.Member, error) {
	if err := claims.CheckRegister(worker); err != nil {
		return claims.Member{}, err
	}
	var out claims.Member
	err := s.run(ctx, "register", func(t *tx) error {
		cur, err := t.member(worker)
		if err != nil {
			return t.fail(err)
		}
		if cur != nil && cur.Identity == identity {
			out = claims.Member{Worker: cur.Worker, Identity: cur.Identity, Gen: cur.Gen}
			return nil
		}
		rev, err := t.nextRev()
		if err != nil {
			return t.fail(err)
		}
		m := memberFile{Worker: worker, Identity: identity, Gen: rev, Session: s.session}
		data, err := json.Marshal(m)
		if err != nil {
			return t.fail(err)
		}
		if err := writeAtomic(s.path("members", encode(worker)), data); err != nil {
			return t.fail(err)
		}
		out = claims.Member{Worker: worker, Identity: identity, Gen: rev}
		return t.fail(t.journal(record{Rev: rev, Op: opMember, Key: rawKey(worker)}))
	})
	return out, err
}

// Deregister implements claims.Store.
func (s *Store) Deregister(ctx context.Context, worker string) error {
	if err := claims.CheckDeregister(worker); err != nil {
		return err
	}
	return s.run(ctx, "deregister", func(t *tx) error {
		if _, err := os.Stat(s.path("members", encode(worker))); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return t.fail(t.removeMember(worker))
	})
}

// Members implements claims.Store.
func (s *Store) Members(ctx context.Context) ([]claims.Member, int64, error) {
	var out []claims.Member
	var rev int64
	err := s.run(ctx, "members", func(t *tx) error {
		ents, err := os.ReadDir(s.path("members"))
		if err != nil {
			return t.fail(err)
		}
		for _, e := range ents {
			var m memberFile
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			ok, err := readJSON(s.path("members", e.Name()), &m)
			if err != nil {
				return t.fail(err)
			}
			if !ok {
				continue
			}
			alive, err := t.isAlive(m.Session)
			if err != nil {
				return t.fail(err)
			}
			if !alive {
				if err := t.removeMember(m.Worker); err != nil {
					return t.fail(err)
				}
				continue
			}
			out = append(out, claims.Member{Worker: m.Worker, Identity: m.Identity, Gen: m.Gen})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
		rev, err = readCounter(s.path("rev"))
		return t.fail(err)
	})
	if err != nil {
		return nil, 0, err
	}
	return out, rev, nil
}

// ReplicaID implements claims.Store: every call returns a new number.
func (s *Store) ReplicaID(ctx context.Context, replica string) (uint64, error) {
	if err := claims.CheckReplicaID(replica); err != nil {
		return 0, err
	}
	var id int64
	err := s.run(ctx, "replica-id", func(t *tx) error {
		p := s.path("replicas")
		n, err := readCounter(p)
		if err != nil {
			return t.fail(err)
		}
		if uint64(n) >= claims.MaxReplicaID {
			return fmt.Errorf("dirstore: replica-id: all %d replica ids are used", uint64(claims.MaxReplicaID))
		}
		id = n + 1
		return t.fail(writeCounter(p, id))
	})
	return uint64(id), err
}

// Sweep deletes the expired claims and cleans up the dead sessions (their
// holds and registrations), as the background sweep does.
func (s *Store) Sweep(ctx context.Context) error {
	return s.run(ctx, "sweep", func(t *tx) error {
		if err := t.sweepSessions(); err != nil {
			return t.fail(err)
		}
		return t.fail(t.sweepClaims())
	})
}

// sweepSessions cleans up after every dead session.
func (t *tx) sweepSessions() error {
	dir := t.s.path("sessions")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var dead []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			// A session file its creator never named: stale after a
			// minute if unlocked.
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Minute {
				if alive, err := sessionAlive(filepath.Join(dir, name)); err == nil && !alive {
					_ = os.Remove(filepath.Join(dir, name))
				}
			}
			continue
		}
		alive, err := t.isAlive(name)
		if err != nil {
			return err
		}
		if !alive {
			dead = append(dead, name)
		}
	}
	if len(dead) == 0 {
		return nil
	}
	isDead := map[string]bool{}
	for _, d := range dead {
		isDead[d] = true
		t.alive[d] = false
	}
	if err := t.cleanup(isDead); err != nil {
		return err
	}
	for _, d := range dead {
		if err := os.Remove(filepath.Join(dir, d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// cleanup drops the holds and registrations of the dead sessions,
// deleting the Closing claims they held last.
func (t *tx) cleanup(isDead map[string]bool) error {
	// Their holds.
	keys, err := os.ReadDir(t.s.path("holds"))
	if err != nil {
		return err
	}
	for _, k := range keys {
		hdir := t.s.path("holds", k.Name())
		hs, err := os.ReadDir(hdir)
		if err != nil {
			continue
		}
		dropped := false
		for _, h := range hs {
			if i := strings.LastIndexByte(h.Name(), '@'); i >= 0 && isDead[h.Name()[i+1:]] {
				_ = os.Remove(filepath.Join(hdir, h.Name()))
				dropped = true
			}
		}
		if !dropped {
			continue
		}
		var c claimFile
		ok, err := readJSON(t.s.path("claims", k.Name()), &c)
		if err != nil {
			return err
		}
		if ok {
			if err := t.closeIfReleased(&c); err != nil {
				return err
			}
		}
	}
	// Their registrations.
	ms, err := os.ReadDir(t.s.path("members"))
	if err != nil {
		return err
	}
	for _, e := range ms {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var m memberFile
		ok, err := readJSON(t.s.path("members", e.Name()), &m)
		if err != nil {
			return err
		}
		if ok && isDead[m.Session] {
			if err := t.removeMember(m.Worker); err != nil {
				return err
			}
		}
	}
	return nil
}

// sweepClaims deletes the expired claims and stale temporary files.
func (t *tx) sweepClaims() error {
	dir := t.s.path("claims")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Minute {
				_ = os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		var c claimFile
		ok, err := readJSON(filepath.Join(dir, name), &c)
		if err != nil {
			return err
		}
		if ok && t.now >= c.Deadline {
			if err := t.deleteClaim(&c); err != nil {
				return err
			}
		}
	}
	return nil
}

// IdleTTL implements claims.Store: Config.IdleTTL (claims.DefaultIdleTTL
// when it was zero).
func (s *Store) IdleTTL() time.Duration { return s.ttl }

// Shutdown implements claims.Store: the handle's holds and registrations
// vanish (a Closing claim it last held is deleted), its streams close and
// later calls fail with claims.ErrClosed.
func (s *Store) Shutdown() error {
	if !s.stopAll() {
		return nil
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	defer s.closeFiles()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := flockCtx(ctx, s.lockFile, syscall.LOCK_EX); err != nil {
		return unavailable("shutdown", err)
	}
	defer funlock(s.lockFile)
	t := &tx{s: s, op: "shutdown", now: s.now(), alive: map[string]bool{s.session: false}}
	errs := []error{t.cleanup(map[string]bool{s.session: true})}
	errs = append(errs, os.Remove(s.path("sessions", s.session)))
	if err := errors.Join(errs...); err != nil {
		return unavailable("shutdown", err)
	}
	return nil
}

// Abandon ends the handle as a killed process would: its streams close
// and later calls fail with claims.ErrClosed, but its holds and
// registrations stay until another handle sees its session dead (its
// liveness lock is released) and cleans up after it. For tests.
func (s *Store) Abandon() {
	if !s.stopAll() {
		return
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.closeFiles()
}

// stopAll marks the handle closed and stops its goroutines; false if it
// was closed already.
func (s *Store) stopAll() bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	close(s.stop)
	w := s.watch
	for sb := range s.subs {
		sb.end()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if w != nil {
		w.close()
	}
	return true
}

func (s *Store) closeFiles() {
	_ = s.sessFile.Close() // releases the liveness lock
	_ = s.lockFile.Close()
}
