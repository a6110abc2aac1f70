package resolver_test

// The ledger's contract (doc.go, rules L1 to L8), one test per rule, on
// a manual clock.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
	"github.com/placementlab/placement/impl/resolver"
)

func newLedger(t *testing.T, tweak ...func(*resolver.LedgerConfig)) (*resolver.Ledger, *placement.ManualClock) {
	t.Helper()
	clk := placement.NewManualClock(time.Hour) // the worker's clock: its own origin
	cfg := resolver.LedgerConfig{Identity: "boot-1", Now: clk.Now, Horizon: 15 * time.Minute, Slack: time.Second}
	for _, f := range tweak {
		f(&cfg)
	}
	l, err := resolver.NewLedger(cfg)
	require.NoError(t, err)
	return l, clk
}

// worker is the ledger's middleware in front of a handler that counts the
// requests it runs.
type worker struct {
	l   *resolver.Ledger
	ran atomic.Int64
	h   http.Handler
}

func newWorker(l *resolver.Ledger) *worker {
	w := &worker{l: l}
	w.h = l.Middleware(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		w.ran.Add(1)
		_, _ = io.WriteString(rw, "ok")
	}))
	return w
}

// send sends a request with attempt header value id ("" for none) and
// returns the status.
func (w *worker) send(id ...string) int {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("{}"))
	for _, v := range id {
		req.Header.Add(resolver.DefaultHeader, v)
	}
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, req)
	return rec.Code
}

const young = 2 * time.Second

// L1: an attempt the ledger recorded answers "arrived".
func TestL1_ArrivedAnswersArrived(t *testing.T) {
	l, _ := newLedger(t)
	w := newWorker(l)
	require.Equal(t, http.StatusOK, w.send("1001"))
	assert.Equal(t, int64(1), w.ran.Load())
	for _, age := range []time.Duration{-1, young, time.Hour} {
		a := l.Ask("1001", age)
		assert.Equal(t, resolver.StateArrived, a.State, "age %v", age)
		assert.Equal(t, "1001", a.ID)
		assert.Empty(t, a.Reason)
	}
	assert.Equal(t, uint64(1), l.Stats().Arrivals)
}

// L2: the fence: "not-arrived" tombstones the id; its late arrival is
// refused before the worker runs anything, and the answer stays.
func TestL2_NotArrivedFencesLateArrival(t *testing.T) {
	l, clk := newLedger(t)
	require.NoError(t, clk.AdvanceBy(time.Hour)) // it has been up an hour
	w := newWorker(l)
	a := l.Ask("1001", young)
	require.Equal(t, resolver.StateNotArrived, a.State)
	require.NoError(t, clk.AdvanceBy(time.Second))
	assert.Equal(t, http.StatusTooEarly, w.send("1001"), "the late arrival is refused")
	assert.Zero(t, w.ran.Load(), "the worker ran nothing")
	assert.ErrorIs(t, l.Arrive("1001"), resolver.ErrAttemptFenced)
	assert.Equal(t, resolver.StateNotArrived, l.Ask("1001", -1).State, "the promise is repeated")
	s := l.Stats()
	assert.Equal(t, uint64(2), s.Refused)
	assert.Equal(t, 1, s.Tombstoned)
	// Other attempts are not affected.
	assert.Equal(t, http.StatusOK, w.send("1002"))
	// The tombstone lasts Horizon.
	require.NoError(t, clk.AdvanceBy(14*time.Minute))
	assert.Equal(t, http.StatusTooEarly, w.send("1001"))
	require.NoError(t, clk.AdvanceBy(time.Minute))
	assert.Equal(t, 0, l.Stats().Tombstoned, "forgotten after Horizon")
	// A custom refusal status.
	l2, clk2 := newLedger(t, func(c *resolver.LedgerConfig) { c.RefusedStatus = http.StatusConflict })
	require.NoError(t, clk2.AdvanceBy(time.Hour))
	require.Equal(t, resolver.StateNotArrived, l2.Ask("7", young).State)
	assert.Equal(t, http.StatusConflict, newWorker(l2).send("7"))
}

// L2 under concurrency: for every id, either the arrival was admitted
// and every answer after it is "arrived", or an answer was "not-arrived"
// and the arrival was refused.
func TestL2_FenceUnderConcurrency(t *testing.T) {
	l, clk := newLedger(t)
	require.NoError(t, clk.AdvanceBy(time.Hour))
	const n = 2000
	admitted, answers := raceArrivals(l, n, func(id string) resolver.Answer { return l.Ask(id, young) })
	var sawNot, sawArrived int
	for i := 0; i < n; i++ {
		for _, a := range answers[i] {
			switch s := a.State; s {
			case resolver.StateNotArrived:
				sawNot++
				require.False(t, admitted[i], "id %d: answered not-arrived and admitted", i)
			case resolver.StateArrived:
				sawArrived++
				require.True(t, admitted[i], "id %d: answered arrived and not admitted", i)
			default:
				t.Fatalf("id %d: unexpected %s", i, s)
			}
		}
		if !admitted[i] {
			promised := false
			for _, a := range answers[i] {
				promised = promised || a.State == resolver.StateNotArrived
			}
			require.True(t, promised, "id %d refused without a promise", i)
		}
	}
	t.Logf("not-arrived answers %d, arrived answers %d", sawNot, sawArrived)
}

// raceArrivals races the arrivals of ids 0..n-1 at l against two answers
// for each from ask, on four goroutines of each: whether each arrival was
// admitted, and each id's answers in order.
func raceArrivals(l *resolver.Ledger, n int, ask func(id string) resolver.Answer) (admitted []bool, answers [][]resolver.Answer) {
	var wg sync.WaitGroup
	admitted = make([]bool, n)
	answers = make([][]resolver.Answer, n)
	var mu sync.Mutex
	for g := 0; g < 4; g++ {
		wg.Add(2)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += 4 {
				if l.Arrive(fmt.Sprint(i)) == nil {
					admitted[i] = true
				}
			}
		}(g)
		go func(g int) {
			defer wg.Done()
			for i := (g + 1) % 4; i < n; i += 4 {
				for k := 0; k < 2; k++ {
					a := ask(fmt.Sprint(i))
					mu.Lock()
					answers[i] = append(answers[i], a)
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	return admitted, answers
}

// L9 under concurrency, on a young ledger (every answer for an id it does
// not remember is a fence, never a promise): for every id, either the
// arrival was admitted and every answer after it is "arrived", or an
// answer fenced it and the arrival was refused.
func TestL9_FenceUnderConcurrency(t *testing.T) {
	l, _ := newLedger(t) // just started: Fence cannot promise
	const n = 2000
	admitted, answers := raceArrivals(l, n, func(id string) resolver.Answer { return l.Fence(id, young) })
	var fenced, arrived int
	for i := 0; i < n; i++ {
		for _, a := range answers[i] {
			switch {
			case a.State == resolver.StateArrived:
				arrived++
				require.True(t, admitted[i], "id %d: answered arrived and not admitted", i)
			case a.State == resolver.StateUnknown && a.Fenced:
				fenced++
				require.False(t, admitted[i], "id %d: fenced and admitted", i)
			default:
				t.Fatalf("id %d: unexpected %+v", i, a)
			}
		}
		if !admitted[i] {
			require.True(t, len(answers[i]) > 0 && answers[i][0].Fenced, "id %d refused without a fence", i)
		}
	}
	t.Logf("fenced answers %d, arrived answers %d", fenced, arrived)
}

// L3: an id the ledger does not remember answers "not-arrived" only when
// it would remember it: with an age, within what it covers.
func TestL3_HorizonAnswersUnknown(t *testing.T) {
	t.Run("no age", func(t *testing.T) {
		l, _ := newLedger(t)
		a := l.Ask("1", -1)
		assert.Equal(t, resolver.StateUnknown, a.State)
		assert.Equal(t, resolver.ReasonNoAge, a.Reason)
	})
	t.Run("restarted ledger", func(t *testing.T) {
		l, clk := newLedger(t) // just started: it covers nothing yet
		a := l.Ask("1", young)
		assert.Equal(t, resolver.StateUnknown, a.State)
		assert.Equal(t, resolver.ReasonHorizon, a.Reason)
		require.NoError(t, clk.AdvanceBy(time.Minute))
		assert.Equal(t, resolver.StateUnknown, l.Ask("2", time.Minute).State, "sent before the ledger started")
		assert.Equal(t, resolver.StateNotArrived, l.Ask("3", 30*time.Second).State, "sent since")
	})
	t.Run("beyond horizon", func(t *testing.T) {
		l, clk := newLedger(t)
		require.NoError(t, clk.AdvanceBy(time.Hour))
		a := l.Ask("1", 15*time.Minute)
		assert.Equal(t, resolver.StateUnknown, a.State)
		assert.Equal(t, resolver.ReasonTooOld, a.Reason)
		assert.Equal(t, resolver.StateNotArrived, l.Ask("2", 10*time.Minute).State)
	})
	t.Run("forgot arrivals under load", func(t *testing.T) {
		l, clk := newLedger(t, func(c *resolver.LedgerConfig) { c.Capacity = 10 })
		require.NoError(t, clk.AdvanceBy(time.Hour))
		for i := 0; i < 15; i++ {
			require.NoError(t, l.Arrive(fmt.Sprint(i)))
			require.NoError(t, clk.AdvanceBy(time.Second))
		}
		// 0..4 were forgotten: the newest forgotten arrived 10 s ago.
		assert.Equal(t, uint64(5), l.Stats().Evicted)
		a := l.Ask("3", 12*time.Second)
		assert.Equal(t, resolver.StateUnknown, a.State, "it arrived, but was forgotten: never not-arrived")
		assert.Equal(t, resolver.ReasonHorizon, a.Reason)
		assert.Equal(t, resolver.StateArrived, l.Ask("12", 12*time.Second).State)
		assert.Equal(t, resolver.StateNotArrived, l.Ask("99", 5*time.Second).State)
	})
}

// L4: a second arrival of an attempt id is refused.
func TestL4_DuplicateRefused(t *testing.T) {
	l, _ := newLedger(t)
	w := newWorker(l)
	require.Equal(t, http.StatusOK, w.send("5"))
	assert.Equal(t, http.StatusTooEarly, w.send("5"))
	assert.Equal(t, int64(1), w.ran.Load())
	assert.ErrorIs(t, l.Arrive("5"), resolver.ErrDuplicateAttempt)
	assert.Equal(t, uint64(2), l.Stats().Duplicates)
}

// L5: at the tombstone bound the ledger answers "unknown" rather than
// promise; room comes back when tombstones pass Horizon.
func TestL5_TombstonesFull(t *testing.T) {
	l, clk := newLedger(t, func(c *resolver.LedgerConfig) { c.Tombstones = 3 })
	require.NoError(t, clk.AdvanceBy(time.Hour))
	for i := 0; i < 3; i++ {
		require.Equal(t, resolver.StateNotArrived, l.Ask(fmt.Sprint(i), young).State)
	}
	a := l.Ask("3", young)
	assert.Equal(t, resolver.StateUnknown, a.State)
	assert.Equal(t, resolver.ReasonFull, a.Reason)
	assert.NoError(t, l.Arrive("3"), "no promise was made: it may arrive")
	require.NoError(t, clk.AdvanceBy(15*time.Minute))
	assert.Equal(t, resolver.StateNotArrived, l.Ask("4", young).State)
}

// L6: memory is bounded by Capacity and Tombstones, and Horizon.
func TestL6_BoundedMemory(t *testing.T) {
	l, clk := newLedger(t, func(c *resolver.LedgerConfig) { c.Capacity = 100; c.Tombstones = 50 })
	require.NoError(t, clk.AdvanceBy(time.Hour))
	for i := 0; i < 1000; i++ {
		require.NoError(t, l.Arrive(fmt.Sprint("a", i)))
		l.Ask(fmt.Sprint("t", i), young)
		s := l.Stats()
		require.LessOrEqual(t, s.Remembered, 100)
		require.LessOrEqual(t, s.Tombstoned, 50)
	}
	require.NoError(t, clk.AdvanceBy(15*time.Minute))
	s := l.Stats()
	assert.Zero(t, s.Remembered)
	assert.Zero(t, s.Tombstoned)
}

// L7: every answer carries the ledger's identity.
func TestL7_AnswersCarryIdentity(t *testing.T) {
	l, _ := newLedger(t, func(c *resolver.LedgerConfig) { c.Identity = "pod-7f" })
	assert.Equal(t, "pod-7f", l.Identity())
	for _, a := range []resolver.Answer{l.Ask("1", -1), l.Ask("2", young), l.Ask("", young)} {
		assert.Equal(t, "pod-7f", a.Identity)
	}
	_, err := resolver.NewLedger(resolver.LedgerConfig{})
	assert.ErrorIs(t, err, resolver.ErrInvalidConfig, "an identity is required")
	_, err = resolver.NewLedger(resolver.LedgerConfig{Identity: "x", RefusedStatus: 200})
	assert.ErrorIs(t, err, resolver.ErrInvalidConfig)
	_, err = resolver.NewLedger(resolver.LedgerConfig{Identity: "x", Horizon: -1})
	assert.ErrorIs(t, err, resolver.ErrInvalidConfig)
}

// L8: requests without the header run unrecorded; an invalid header is a
// 400, and nothing runs.
func TestL8_Header(t *testing.T) {
	l, _ := newLedger(t)
	w := newWorker(l)
	assert.Equal(t, http.StatusOK, w.send())
	assert.Equal(t, http.StatusOK, w.send())
	assert.Equal(t, uint64(0), l.Stats().Arrivals)
	for _, bad := range [][]string{{""}, {"has space"}, {strings.Repeat("x", resolver.MaxAttemptIDBytes+1)}, {"é"}, {"1", "2"}} {
		assert.Equal(t, http.StatusBadRequest, w.send(bad...), "%q", bad)
	}
	assert.Equal(t, int64(2), w.ran.Load())
	assert.ErrorIs(t, resolver.ValidateAttemptID(""), resolver.ErrInvalidAttemptID)
	assert.NoError(t, resolver.ValidateAttemptID(strings.Repeat("x", resolver.MaxAttemptIDBytes)))
	// A custom header.
	l2, _ := newLedger(t, func(c *resolver.LedgerConfig) { c.Header = "X-Attempt" })
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Header.Set("X-Attempt", "9")
	l2.Middleware(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), req)
	assert.Equal(t, resolver.StateArrived, l2.Ask("9", -1).State)
}

// The handler: its route, methods, parameters and JSON.
func TestLedgerHandler(t *testing.T) {
	l, clk := newLedger(t)
	require.NoError(t, clk.AdvanceBy(time.Hour))
	require.NoError(t, l.Arrive("1001"))
	srv := httptest.NewServer(l.Handler("/placement/"))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	code, body := get("/placement/attempts/1001")
	assert.Equal(t, 200, code)
	assert.JSONEq(t, `{"id":"1001","state":"arrived","identity":"boot-1"}`, body)
	code, body = get("/placement/attempts/1002?age_ms=2000")
	assert.Equal(t, 200, code)
	assert.JSONEq(t, `{"id":"1002","state":"not-arrived","identity":"boot-1"}`, body)
	code, body = get("/placement/attempts/1003")
	assert.Equal(t, 200, code)
	assert.JSONEq(t, `{"id":"1003","state":"unknown","identity":"boot-1","reason":"no-age"}`, body)
	code, body = get("/placement/attempts/1005?fence=1")
	assert.Equal(t, 200, code)
	assert.JSONEq(t, `{"id":"1005","state":"unknown","identity":"boot-1","reason":"no-age","fenced":true,"covered_ms":3600000}`, body)
	code, _ = get("/placement/attempts/1006?fence=yes")
	assert.Equal(t, 400, code)
	code, _ = get("/placement/attempts/1004?age_ms=-5")
	assert.Equal(t, 400, code)
	code, _ = get("/placement/attempts/1004?age_ms=x")
	assert.Equal(t, 400, code)
	code, _ = get("/placement/attempts/" + strings.Repeat("9", 200))
	assert.Equal(t, 400, code)
	code, _ = get("/placement/other")
	assert.Equal(t, 404, code)
	resp, err := http.Post(srv.URL+"/placement/attempts/1001", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// The ledger's default refusal is one the router's outcome table reads as
// DefinitelyNotAccepted: a fenced or duplicate arrival runs nothing, so the
// router must neither relay it as the worker's answer nor bind on it (with
// 409, the first default, impl/httpoutcome read it as Accepted).
func TestL2_DefaultRefusalIsNotAccepted(t *testing.T) {
	assert.Equal(t, placement.DefinitelyNotAccepted, httpoutcome.Table{}.Outcome(resolver.DefaultRefusedStatus))
}

// L9: Fence. Where the age alone cannot show an unremembered attempt did
// not arrive (a young ledger, no age), the ledger fences it and says how
// long before the answer it is sure the attempt did not arrive; the
// fence refuses its later arrival, a later question judges the age
// against the same window, and a full tombstone list fences nothing.
// Ask alone never fences.
func TestL9_FenceAnswersWithItsWindow(t *testing.T) {
	l, clk := newLedger(t) // Slack 1 s
	require.NoError(t, clk.AdvanceBy(1500*time.Millisecond))
	a := l.Ask("1", young)
	assert.Equal(t, resolver.StateUnknown, a.State)
	assert.False(t, a.Fenced, "Ask never fences")
	assert.NoError(t, l.Arrive("1"))

	a = l.Fence("2", time.Second) // within Slack of the ledger's start
	assert.Equal(t, resolver.StateUnknown, a.State)
	assert.Equal(t, resolver.ReasonHorizon, a.Reason)
	assert.True(t, a.Fenced)
	assert.Equal(t, int64(1500), a.CoveredMS)
	assert.ErrorIs(t, l.Arrive("2"), resolver.ErrAttemptFenced, "fenced: its late arrival is refused")

	require.NoError(t, clk.AdvanceBy(10*time.Second))
	a = l.Fence("2", 11*time.Second) // still not provably after the window began
	assert.Equal(t, resolver.StateUnknown, a.State)
	assert.Equal(t, int64(11500), a.CoveredMS, "the window is the one it fenced with")
	a = l.Ask("2", 5*time.Second) // an age well inside the window: a promise now
	assert.Equal(t, resolver.StateNotArrived, a.State)
	assert.Equal(t, resolver.StateNotArrived, l.Fence("2", -1).State)

	a = l.Fence("3", -1) // no age: fenced, the window since the start
	assert.Equal(t, resolver.ReasonNoAge, a.Reason)
	assert.True(t, a.Fenced)
	assert.Equal(t, int64(11500), a.CoveredMS)

	full, fclk := newLedger(t, func(c *resolver.LedgerConfig) { c.Tombstones = 1 })
	require.NoError(t, fclk.AdvanceBy(time.Second))
	assert.True(t, full.Fence("1", -1).Fenced)
	a = full.Fence("2", -1)
	assert.Equal(t, resolver.ReasonFull, a.Reason)
	assert.False(t, a.Fenced)
	assert.NoError(t, full.Arrive("2"), "no fence: it may arrive")
	assert.Equal(t, 1, full.Stats().Tombstoned)
}
