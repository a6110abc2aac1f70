package resolver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultHeader is the header a router sends the attempt id in, and the one
// a Ledger reads. It is the router's own: never Idempotency-Key, which Go's
// http.Client takes as leave to re-send the request by itself (see
// affinity.Attempt.ID).
const DefaultHeader = "X-Placement-Attempt"

// MaxAttemptIDBytes bounds an attempt id in the header.
const MaxAttemptIDBytes = 128

// Defaults of LedgerConfig's zero fields.
const (
	// DefaultHorizon covers the core's default QuarantineTTL (10 min) plus
	// its default DispatchTimeout (1 min), with room to spare.
	DefaultHorizon       = 15 * time.Minute
	DefaultCapacity      = 1 << 16
	DefaultTombstones    = 1 << 12
	DefaultSlack         = 5 * time.Second
	DefaultRefusedStatus = http.StatusTooEarly
)

// Ledger errors.
var (
	// ErrAttemptFenced: an attempt arrived after the ledger had answered
	// that it did not arrive: it is refused (see the package doc, the
	// fence).
	ErrAttemptFenced = errors.New("resolver: attempt arrived after it was answered not arrived")
	// ErrDuplicateAttempt: an attempt id arrived a second time (a replay:
	// a router sends each attempt once).
	ErrDuplicateAttempt = errors.New("resolver: attempt id arrived twice")
	// ErrInvalidAttemptID: an attempt id is empty, longer than
	// MaxAttemptIDBytes, or has bytes outside visible ASCII.
	ErrInvalidAttemptID = errors.New("resolver: invalid attempt id")
)

// LedgerConfig configures a Ledger. Identity is required.
type LedgerConfig struct {
	// Identity names this worker instance (the boot id or pod uid it
	// joins the router's layer with). Every answer carries it, so a
	// router can tell a restarted worker from the one it sent to.
	Identity string
	// Header is where requests carry the attempt id; "" means
	// DefaultHeader.
	Header string
	// Horizon is how long an arrival or a not-arrived answer is
	// remembered. Set it above the router's QuarantineTTL plus its
	// DispatchTimeout (DefaultHorizon covers the core's defaults), and
	// above the longest time a request can spend between the router and
	// this worker: a not-arrived answer is kept, and its late arrival
	// refused, for Horizon.
	Horizon time.Duration
	// Capacity bounds the arrivals remembered (the oldest go first, and
	// the ledger then answers Unknown for attempts as old as they were).
	// Zero means DefaultCapacity.
	Capacity int
	// Tombstones bounds the not-arrived answers remembered: at the bound
	// the ledger answers Unknown rather than make a promise it could not
	// keep for Horizon. Zero means DefaultTombstones.
	Tombstones int
	// Slack is added to every age a router gives, for the two clocks'
	// different rates and the request's time on the network. Zero means
	// DefaultSlack.
	Slack time.Duration
	// RefusedStatus is the HTTP status the middleware answers a fenced or
	// duplicate arrival with, before the worker runs anything. Zero means
	// 425 Too Early (RFC 8470: the server will not risk processing a
	// request that might be a replay), which impl/httpoutcome's default
	// table reads as DefinitelyNotAccepted, as it is.
	RefusedStatus int
	// Now is the ledger's clock; nil means the runtime's monotonic clock
	// since NewLedger (a *placement.ManualClock's Now drives it in tests).
	Now func() time.Duration
}

// State is a Ledger's answer about one attempt.
type State string

// States, as the JSON answer spells them (Verdict's String).
const (
	StateArrived    State = "arrived"
	StateNotArrived State = "not-arrived"
	StateUnknown    State = "unknown"
)

// Reasons an answer is Unknown.
const (
	ReasonNoAge    = "no-age"    // the asker gave no age: the ledger cannot tell "never" from "forgotten"
	ReasonHorizon  = "horizon"   // the attempt may be older than what the ledger remembers (horizon, capacity, restart)
	ReasonFull     = "full"      // the tombstones are at their bound
	ReasonTooOld   = "too-old"   // the age is beyond Horizon itself
	ReasonBadInput = "bad-input" // (HTTP only) the id or age could not be read
)

// Answer is the JSON a Ledger's handler returns for GET .../attempts/{id}.
type Answer struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	// Identity is the ledger's (the worker instance's) identity.
	Identity string `json:"identity"`
	// Reason says why the State is unknown ("" otherwise).
	Reason string `json:"reason,omitempty"`
	// Fenced, on an unknown answer to a question that asked for the
	// fence (Ledger.Fence, or fence=1): the attempt is fenced (its later
	// arrival is refused, as after "not-arrived"), and it did not arrive
	// in the CoveredMS milliseconds (on the ledger's clock, rounded down)
	// before this answer. The asker, who knows when it dispatched the
	// attempt and when it asked, can then conclude "not arrived" itself
	// when the attempt was sent within that window (HTTPStatus does).
	Fenced    bool  `json:"fenced,omitempty"`
	CoveredMS int64 `json:"covered_ms,omitempty"`
}

// LedgerStats are a Ledger's counters (cumulative) and gauges.
type LedgerStats struct {
	// Arrivals admitted; Refused: arrivals refused (fenced), Duplicates:
	// ids that arrived twice (refused too).
	Arrivals, Refused, Duplicates uint64
	// Answers by state.
	AnsweredArrived, AnsweredNotArrived, AnsweredUnknown uint64
	// Evicted: arrivals forgotten by capacity before their Horizon.
	Evicted uint64
	// Remembered arrivals and tombstones now (fences included: see
	// Fence).
	Remembered, Tombstoned int
}

type entryKind uint8

const (
	kindArrived entryKind = iota + 1
	kindTomb              // answered not-arrived: a promise
	kindFence             // fenced, answered unknown: no arrival since cover
)

// entry is what the ledger remembers of one id.
type entry struct {
	kind entryKind
	// cover (kindTomb, kindFence): the start of what the ledger covered
	// when it fenced the id; no arrival of the id came since.
	cover time.Duration
}

type fifoItem struct {
	id string
	at time.Duration
}

// fifo is a queue of ids by the time they were recorded.
type fifo struct {
	items []fifoItem
	head  int
}

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) push(it fifoItem) { f.items = append(f.items, it) }

func (f *fifo) front() fifoItem { return f.items[f.head] }

func (f *fifo) pop() fifoItem {
	it := f.items[f.head]
	f.items[f.head] = fifoItem{}
	f.head++
	if f.head > 64 && f.head*2 >= len(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items = f.items[:n]
		f.head = 0
	}
	return it
}

// Ledger is the worker side of the resolver: its Middleware records the
// attempt ids of requests as they arrive, and its Handler answers whether
// an attempt arrived. Answering "not arrived" is a promise: the ledger
// then refuses that attempt if it arrives later. It is safe for concurrent
// use; memory is bounded by Capacity and Tombstones.
type Ledger struct {
	cfg   LedgerConfig
	start time.Duration

	mu        sync.Mutex
	m         map[string]entry
	arrivals  fifo
	tombs     fifo
	evictedAt time.Duration // arrivals recorded at or before it may be forgotten
	stats     LedgerStats
}

// NewLedger returns a ledger for cfg.
func NewLedger(cfg LedgerConfig) (*Ledger, error) {
	if cfg.Identity == "" {
		return nil, &ConfigError{"Identity", "is required (the worker instance's boot id or pod uid)"}
	}
	if cfg.Header == "" {
		cfg.Header = DefaultHeader
	}
	if cfg.Horizon < 0 || cfg.Capacity < 0 || cfg.Tombstones < 0 || cfg.Slack < 0 {
		return nil, &ConfigError{"Horizon, Capacity, Tombstones, Slack", "must not be negative"}
	}
	if cfg.RefusedStatus != 0 && (cfg.RefusedStatus < 400 || cfg.RefusedStatus > 599) {
		return nil, &ConfigError{"RefusedStatus", fmt.Sprintf("must be a 4xx or 5xx status, got %d", cfg.RefusedStatus)}
	}
	if cfg.Horizon == 0 {
		cfg.Horizon = DefaultHorizon
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Tombstones == 0 {
		cfg.Tombstones = DefaultTombstones
	}
	if cfg.Slack == 0 {
		cfg.Slack = DefaultSlack
	}
	if cfg.RefusedStatus == 0 {
		cfg.RefusedStatus = DefaultRefusedStatus
	}
	if cfg.Now == nil {
		t0 := time.Now()
		cfg.Now = func() time.Duration { return time.Since(t0) }
	}
	start := cfg.Now()
	return &Ledger{cfg: cfg, start: start, evictedAt: start, m: make(map[string]entry)}, nil
}

// Identity returns the ledger's identity.
func (l *Ledger) Identity() string { return l.cfg.Identity }

// ValidateAttemptID checks an attempt id: 1 to MaxAttemptIDBytes bytes of
// visible ASCII.
func ValidateAttemptID(id string) error {
	if id == "" || len(id) > MaxAttemptIDBytes {
		return fmt.Errorf("%w: length %d (1 to %d bytes)", ErrInvalidAttemptID, len(id), MaxAttemptIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: byte %#x at %d", ErrInvalidAttemptID, c, i)
		}
	}
	return nil
}

// expire forgets what is older than Horizon, and arrivals past Capacity.
// Called with mu held.
func (l *Ledger) expire(now time.Duration) {
	for l.arrivals.len() > 0 && (l.arrivals.len() > l.cfg.Capacity || l.arrivals.front().at <= now-l.cfg.Horizon) {
		it := l.arrivals.pop()
		if it.at > now-l.cfg.Horizon {
			l.stats.Evicted++
		}
		l.evictedAt = max(l.evictedAt, it.at)
		if l.m[it.id].kind == kindArrived {
			delete(l.m, it.id)
		}
	}
	for l.tombs.len() > 0 && l.tombs.front().at <= now-l.cfg.Horizon {
		it := l.tombs.pop()
		if k := l.m[it.id].kind; k == kindTomb || k == kindFence {
			delete(l.m, it.id)
		}
	}
}

// Arrive records that attempt id arrived. It returns ErrAttemptFenced if
// the ledger answered that id not arrived, ErrDuplicateAttempt if it
// arrived before, ErrInvalidAttemptID for an invalid id; the caller must
// then not run the request.
func (l *Ledger) Arrive(id string) error {
	if err := ValidateAttemptID(id); err != nil {
		return err
	}
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	switch l.m[id].kind {
	case kindTomb, kindFence:
		l.stats.Refused++
		return ErrAttemptFenced
	case kindArrived:
		l.stats.Duplicates++
		return ErrDuplicateAttempt
	}
	l.m[id] = entry{kind: kindArrived}
	l.arrivals.push(fifoItem{id, now})
	l.stats.Arrivals++
	l.expire(now) // capacity
	return nil
}

// Ask answers whether attempt id arrived. age is how long ago, at most,
// the router sent it (negative: not known). An id the ledger remembers
// answers what it remembers. An id it does not answers NotArrived only if
// it would remember the id had it arrived (age plus Slack within what the
// ledger covers: since it started, since the newest arrival it forgot,
// and within Horizon) and it has room to keep the promise; it then
// tombstones the id, so the id's late arrival is refused. Otherwise it
// answers Unknown, with the reason.
func (l *Ledger) Ask(id string, age time.Duration) Answer { return l.ask(id, age, false) }

// Fence answers as Ask does, and where Ask answers Unknown for an id the
// ledger does not remember (for its age: none given, too old for what the
// ledger covers, as a young ledger's is), it fences the id if it has room
// for a tombstone: the id's later arrival is refused, and the answer says
// so (Fenced) and for how long before it the ledger is sure the id did not
// arrive (CoveredMS: since it started, since the newest arrival it forgot,
// or since it fenced the id). An asker that knows the attempt was sent
// after that window began concludes "not arrived" (HTTPStatus does, over
// the question's round trip); a later Ask or Fence of the id judges its age
// against the same window, and answers NotArrived once it can promise.
func (l *Ledger) Fence(id string, age time.Duration) Answer { return l.ask(id, age, true) }

func (l *Ledger) ask(id string, age time.Duration, fence bool) Answer {
	a := Answer{ID: id, Identity: l.cfg.Identity, State: StateUnknown}
	if ValidateAttemptID(id) != nil {
		a.Reason = ReasonBadInput
		l.mu.Lock()
		l.stats.AnsweredUnknown++
		l.mu.Unlock()
		return a
	}
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	switch e := l.m[id]; e.kind {
	case kindArrived:
		a.State = StateArrived
	case kindTomb:
		a.State = StateNotArrived
	default:
		// Not remembered, or fenced without a promise: no arrival since
		// cover. The promise needs the attempt sent after cover.
		cover, fenced := max(l.start, l.evictedAt), e.kind == kindFence
		if fenced {
			cover = e.cover
		}
		covered := now - cover
		switch {
		case age < 0:
			a.Reason = ReasonNoAge
		case age+l.cfg.Slack >= l.cfg.Horizon:
			a.Reason = ReasonTooOld
		case age+l.cfg.Slack >= covered:
			a.Reason = ReasonHorizon
		case !fenced && l.tombs.len() >= l.cfg.Tombstones:
			a.Reason = ReasonFull
		default:
			if !fenced {
				l.tombs.push(fifoItem{id, now})
			}
			l.m[id] = entry{kind: kindTomb, cover: cover}
			a.State = StateNotArrived
		}
		if a.State == StateUnknown && (fence || fenced) && a.Reason != ReasonFull {
			if !fenced && l.tombs.len() >= l.cfg.Tombstones {
				a.Reason = ReasonFull
				break
			}
			if !fenced {
				l.m[id] = entry{kind: kindFence, cover: cover}
				l.tombs.push(fifoItem{id, now})
			}
			a.Fenced, a.CoveredMS = true, int64(covered/time.Millisecond)
		}
	}
	switch a.State {
	case StateArrived:
		l.stats.AnsweredArrived++
	case StateNotArrived:
		l.stats.AnsweredNotArrived++
	default:
		l.stats.AnsweredUnknown++
	}
	return a
}

// Stats returns the ledger's counters.
func (l *Ledger) Stats() LedgerStats {
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	s := l.stats
	s.Remembered, s.Tombstoned = l.arrivals.len(), l.tombs.len()
	return s
}

// Middleware records the attempt id of each request that carries the
// header, then runs next. A request whose attempt the ledger answered not
// arrived, or that arrived before, is refused with RefusedStatus (and a
// JSON error) without running next; a header that is invalid or given
// twice is refused with 400. A request without the header runs unrecorded.
func (l *Ledger) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vs := r.Header.Values(l.cfg.Header)
		if len(vs) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if len(vs) > 1 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": l.cfg.Header + " given twice"})
			return
		}
		switch err := l.Arrive(vs[0]); {
		case err == nil:
			next.ServeHTTP(w, r)
		case errors.Is(err, ErrInvalidAttemptID):
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, l.cfg.RefusedStatus, map[string]string{"error": err.Error(), "id": vs[0], "identity": l.cfg.Identity})
		}
	})
}

// Handler answers GET <prefix>/attempts/{id}?age_ms=N with an Answer as
// JSON (200). age_ms is how long ago, at most, the router sent the
// attempt, in milliseconds; without it an attempt the ledger does not
// remember answers Unknown (ReasonNoAge). With fence=1 it answers as
// Fence, otherwise as Ask. A malformed id, age_ms or fence is a 400; other
// methods a 405; other paths a 404. prefix is "" or begins with "/" and
// does not end with one.
func (l *Ledger) Handler(prefix string) http.Handler {
	prefix = strings.TrimSuffix(prefix, "/")
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+prefix+"/attempts/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		age := time.Duration(-1)
		if s := r.URL.Query().Get("age_ms"); s != "" {
			ms, err := strconv.ParseInt(s, 10, 64)
			if err != nil || ms < 0 || ms > int64(time.Duration(1<<62)/time.Millisecond) {
				writeJSON(w, http.StatusBadRequest, Answer{ID: id, State: StateUnknown, Identity: l.cfg.Identity, Reason: ReasonBadInput})
				return
			}
			age = time.Duration(ms) * time.Millisecond
		}
		fence := false
		switch r.URL.Query().Get("fence") {
		case "":
		case "1":
			fence = true
		default:
			writeJSON(w, http.StatusBadRequest, Answer{ID: id, State: StateUnknown, Identity: l.cfg.Identity, Reason: ReasonBadInput})
			return
		}
		if ValidateAttemptID(id) != nil {
			writeJSON(w, http.StatusBadRequest, Answer{ID: id, State: StateUnknown, Identity: l.cfg.Identity, Reason: ReasonBadInput})
			return
		}
		writeJSON(w, http.StatusOK, l.ask(id, age, fence))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
