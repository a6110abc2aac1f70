//go:build linux

package dirstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/placementlab/placement/impl/claims"
)

// Events implements claims.Store. The handle's journal reader starts with
// its first stream and runs until Shutdown.
func (s *Store) Events(ctx context.Context) (<-chan claims.Event, error) {
	if ctx == nil {
		return nil, invalid("events", "nil context")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("dirstore: events: %w", claims.ErrClosed)
	}
	w := s.watch
	s.mu.Unlock()
	if w == nil {
		nw, err := s.startWatcher(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			nw.close()
			return nil, fmt.Errorf("dirstore: events: %w", claims.ErrClosed)
		case s.watch != nil: // another stream started one first
			s.mu.Unlock()
			nw.close()
		default:
			s.watch = nw
			s.mu.Unlock()
			nw.run()
		}
	}
	sb := &sub{
		s:    s,
		ch:   make(chan claims.Event),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("dirstore: events: %w", claims.ErrClosed)
	}
	s.subs[sb] = struct{}{}
	sb.push(claims.Event{Kind: claims.Reset, Why: "stream start"}, s.cfg.EventBuffer)
	s.mu.Unlock()
	go sb.pump(ctx)
	return sb.ch, nil
}

// broadcast queues ev on every stream of s.
func (s *Store) broadcast(ev claims.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sb := range s.subs {
		sb.push(ev, s.cfg.EventBuffer)
	}
}

// watcher reads the journal for a handle's streams.
type watcher struct {
	s *Store

	// The reader's position; only the run goroutine touches them after
	// start.
	seg     string   // current segment's name
	f       *os.File // current segment
	off     int64
	partial []byte
	expect  int64            // the next revision to read
	view    map[string]int64 // key → current claim revision, per the journal

	inotify *os.File // nil when inotify is unavailable
	wake    chan struct{}
	stop    chan struct{}
	done    sync.WaitGroup
}

// startWatcher positions a reader at the journal's end, under the lock.
func (s *Store) startWatcher(ctx context.Context) (*watcher, error) {
	w := &watcher{s: s, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	err := s.run(ctx, "events", func(t *tx) error { return t.fail(w.resyncLocked()) })
	if err != nil {
		w.closeFile()
		return nil, err
	}
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err == nil {
		_, err = syscall.InotifyAddWatch(fd, s.path("journal"), syscall.IN_MODIFY|syscall.IN_CREATE|syscall.IN_MOVED_TO)
		if err != nil {
			_ = syscall.Close(fd)
		} else {
			// Nonblocking: the runtime poller reads it, and Close ends a
			// pending Read.
			w.inotify = os.NewFile(uintptr(fd), "inotify")
		}
	}
	return w, nil
}

// run starts the watcher's goroutines.
func (w *watcher) run() {
	if w.inotify != nil {
		w.done.Add(1)
		go w.readInotify()
	}
	w.done.Add(1)
	go w.loop()
}

// close stops the watcher and waits for its goroutines.
func (w *watcher) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	if w.inotify != nil {
		_ = w.inotify.Close()
	}
	w.done.Wait()
	w.closeFile()
}

func (w *watcher) closeFile() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// readInotify turns inotify events into wake-ups. An overflow
// (IN_Q_OVERFLOW) lost only wake-ups: the journal holds every record, and
// the wake-up makes the reader read it.
func (w *watcher) readInotify() {
	defer w.done.Done()
	buf := make([]byte, 64*(syscall.SizeofInotifyEvent+syscall.NAME_MAX+1))
	for {
		if _, err := w.inotify.Read(buf); err != nil {
			return // closed
		}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *watcher) loop() {
	defer w.done.Done()
	poll := time.NewTicker(w.s.cfg.PollEvery)
	defer poll.Stop()
	rescan := time.NewTicker(w.s.cfg.RescanEvery)
	defer rescan.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		case <-w.s.poke:
		case <-poll.C:
		case <-rescan.C:
			w.rescan()
			continue
		}
		if why := w.read(); why != "" {
			w.resync(why)
		}
	}
}

// read reads the journal from the reader's position to its end,
// emitting the events; a non-empty result says why the reader must
// resync (it stopped at the problem).
func (w *watcher) read() string {
	for {
		if why := w.readSegment(); why != "" {
			return why
		}
		segs, err := segments(w.s.path("journal"))
		if err != nil {
			return "journal unreadable: " + err.Error()
		}
		next := ""
		for _, n := range segs {
			if n > w.seg {
				next = n
				break
			}
		}
		if next == "" {
			return ""
		}
		// A newer segment exists, so the current one is final: read its
		// last records, then move on.
		if why := w.readSegment(); why != "" {
			return why
		}
		if len(w.partial) > 0 {
			return "journal segment ends in a partial record"
		}
		f, err := os.Open(filepath.Join(w.s.path("journal"), next))
		if errors.Is(err, fs.ErrNotExist) {
			continue // compacted meanwhile: list again
		}
		if err != nil {
			return "journal unreadable: " + err.Error()
		}
		w.closeFile()
		w.f, w.seg, w.off = f, next, 0
	}
}

// readSegment reads the current segment's complete records.
func (w *watcher) readSegment() string {
	if w.f == nil {
		return ""
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.ReadAt(buf, w.off)
		if n > 0 {
			w.off += int64(n)
			data := append(w.partial, buf[:n]...)
			for {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					break
				}
				if why := w.apply(data[:i]); why != "" {
					return why
				}
				data = data[i+1:]
			}
			w.partial = append([]byte(nil), data...)
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return ""
		}
		if err != nil {
			return "journal unreadable: " + err.Error()
		}
	}
}

// apply handles one journal line; a non-empty result is a reason to
// resync.
func (w *watcher) apply(line []byte) string {
	if len(bytes.TrimSpace(line)) == 0 {
		return ""
	}
	var r record
	if err := json.Unmarshal(line, &r); err != nil || r.Rev <= 0 {
		return "corrupt journal record"
	}
	switch {
	case r.Rev < w.expect:
		return "" // read already (before a resync's position)
	case r.Rev > w.expect:
		return fmt.Sprintf("journal gap: revisions %d to %d missing", w.expect, r.Rev-1)
	}
	w.expect++
	switch r.Op {
	case opClaim:
		w.view[string(r.Key)] = r.Rev
	case opDelete:
		delete(w.view, string(r.Key))
	case opMember:
		w.s.broadcast(claims.Event{Kind: claims.MembersChanged, Key: string(r.Key), Rev: r.Rev})
		return ""
	}
	if r.Ended > 0 {
		w.s.broadcast(claims.Event{Kind: claims.Delete, Key: string(r.Key), Rev: r.Ended})
	}
	return ""
}

// stopContext returns a context that ends when w stops or cancel is
// called (the caller must call it).
func (w *watcher) stopContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// resync repositions the reader at the journal's end and tells every
// stream it may have lost events.
func (w *watcher) resync(why string) {
	ctx, cancel := w.stopContext()
	defer cancel()
	err := w.s.run(ctx, "events", func(t *tx) error { return w.resyncLocked() })
	if err != nil {
		why += "; resync failed: " + err.Error()
	}
	w.s.broadcast(claims.Event{Kind: claims.Reset, Why: why})
}

// resyncLocked, under the store's lock (no write in progress), moves the
// reader to the journal's end and rebuilds its view from the claims
// directory.
func (w *watcher) resyncLocked() error {
	rev, err := readCounter(w.s.path("rev"))
	if err != nil {
		return err
	}
	view, err := w.scan()
	if err != nil {
		return err
	}
	segs, err := segments(w.s.path("journal"))
	if err != nil {
		return err
	}
	w.closeFile()
	w.seg, w.off, w.partial = "", 0, nil
	if len(segs) > 0 {
		last := segs[len(segs)-1]
		f, err := os.Open(filepath.Join(w.s.path("journal"), last))
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return err
		}
		w.f, w.seg, w.off = f, last, st.Size()
	} else {
		// No journal yet: the first segment will be named after the
		// first revision.
		w.seg = segmentName(0)
	}
	w.expect = rev + 1
	w.view = view
	return nil
}

// scan reads every claim's revision from the claims directory.
func (w *watcher) scan() (map[string]int64, error) {
	dir := w.s.path("claims")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	view := make(map[string]int64, len(ents))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var c claimFile
		ok, err := readJSON(filepath.Join(dir, e.Name()), &c)
		if err != nil {
			return nil, err
		}
		if ok {
			view[string(c.Key)] = c.Rev
		}
	}
	return view, nil
}

// rescan, under the lock, reads the journal to its end and compares the
// state it implies with the claims directory: a difference the journal
// missed is a Reset.
func (w *watcher) rescan() {
	ctx, cancel := w.stopContext()
	defer cancel()
	why := ""
	_ = w.s.run(ctx, "events", func(t *tx) error {
		if why = w.read(); why != "" {
			return w.resyncLocked()
		}
		rev, err := readCounter(w.s.path("rev"))
		if err != nil {
			return err
		}
		if rev+1 != w.expect {
			why = fmt.Sprintf("rescan: the journal lacks revisions %d to %d", w.expect, rev)
			return w.resyncLocked()
		}
		view, err := w.scan()
		if err != nil {
			return err
		}
		if !sameView(view, w.view) {
			why = "rescan: the claims directory differs from the journal"
			w.view = view
		}
		return nil
	})
	if why != "" {
		w.s.broadcast(claims.Event{Kind: claims.Reset, Why: why})
	}
}

func sameView(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// sub is one event stream.
type sub struct {
	s    *Store
	ch   chan claims.Event
	wake chan struct{}
	done chan struct{}

	// Guarded by s.mu.
	q     []claims.Event
	ended bool
}

// push queues ev; a full queue becomes a Reset (then ev). The caller holds
// s.mu.
func (sb *sub) push(ev claims.Event, limit int) {
	if sb.ended {
		return
	}
	if len(sb.q) >= limit {
		// What was queued is lost: a Reset in its place, then ev.
		sb.q = append(sb.q[:0], claims.Event{Kind: claims.Reset, Why: "slow consumer: event buffer overflowed"})
	}
	sb.q = append(sb.q, ev)
	select {
	case sb.wake <- struct{}{}:
	default:
	}
}

// end closes done once. The caller holds s.mu.
func (sb *sub) end() {
	if !sb.ended {
		sb.ended = true
		close(sb.done)
	}
}

func (sb *sub) pump(ctx context.Context) {
	s := sb.s
	defer func() {
		s.mu.Lock()
		delete(s.subs, sb)
		sb.end()
		sb.q = nil
		s.mu.Unlock()
		close(sb.ch)
	}()
	for {
		s.mu.Lock()
		var ev claims.Event
		ok := len(sb.q) > 0
		if ok {
			ev = sb.q[0]
			sb.q = sb.q[1:]
		}
		s.mu.Unlock()
		if !ok {
			select {
			case <-sb.wake:
				continue
			case <-sb.done:
				return
			case <-ctx.Done():
				return
			}
		}
		select {
		case sb.ch <- ev:
		case <-sb.done:
			return
		case <-ctx.Done():
			return
		}
	}
}
