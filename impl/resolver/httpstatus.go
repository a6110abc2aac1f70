package resolver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// HTTPStatus errors (each counts as Unknown).
var (
	// ErrIdentityMismatch: the ledger that answered is not the worker
	// instance the attempt was sent to (see *IdentityError).
	ErrIdentityMismatch = errors.New("resolver: the answer came from another worker instance")
	// ErrBadAnswer: the ledger's answer could not be read (see
	// *AnswerError).
	ErrBadAnswer = errors.New("resolver: unreadable answer")
)

// IdentityError says which instance answered and which was asked for.
type IdentityError struct{ Want, Got string }

// Error describes the error.
func (e *IdentityError) Error() string {
	return fmt.Sprintf("resolver: answer from instance %q, the attempt went to %q", e.Got, e.Want)
}

// Is reports whether target is ErrIdentityMismatch.
func (e *IdentityError) Is(target error) bool { return target == ErrIdentityMismatch }

// AnswerError says why an answer could not be read: an HTTP status other
// than 200, or a body that is not an Answer.
type AnswerError struct {
	StatusCode int
	Reason     string
}

// Error describes the error.
func (e *AnswerError) Error() string {
	return fmt.Sprintf("resolver: unreadable answer (HTTP %d): %s", e.StatusCode, e.Reason)
}

// Is reports whether target is ErrBadAnswer.
func (e *AnswerError) Is(target error) bool { return target == ErrBadAnswer }

// Defaults of HTTPConfig's zero fields.
const (
	// DefaultMaxDrift bounds how far the router's and a ledger's clocks
	// may run apart, as a fraction of the time measured: 1000 ppm, twice
	// what NTP ever slews a clock by.
	DefaultMaxDrift = 1e-3
	// DefaultClockMargin covers the router's clock resolution (the
	// coarsest the core allows, placement.MaxClockResolution).
	DefaultClockMargin = placement.MaxClockResolution
)

// HTTPConfig configures HTTPStatus. Its zero value suits a Status run by
// a Resolver on an *affinity.Layer.
type HTTPConfig struct {
	// Now is the router's clock, the one the quarantines' times are read
	// on (the layer's Now). nil means the clock of the Resolver that calls
	// the Status (its Source's Now, which it passes in the call's context:
	// ContextWithNow); a Status called with neither sends no age, and a
	// ledger that does not remember the attempt answers Unknown.
	Now func() time.Duration
	// DispatchTimeout is the layer's (zero: the core's default): the
	// attempt was dispatched at most this long before its quarantine
	// began. Only a Source whose quarantines carry no DispatchedAt needs
	// it; otherwise DispatchedAt bounds the attempt's age more tightly.
	DispatchTimeout time.Duration
	// MaxDrift and ClockMargin make HTTPStatus's own conclusion from a
	// fenced answer sound against the two clocks' rates and the router
	// clock's resolution (zero: DefaultMaxDrift, DefaultClockMargin).
	MaxDrift    float64
	ClockMargin time.Duration
	// AttemptID formats the id the router sent in the header; nil means
	// the decimal attempt id (strconv.FormatUint(q.Attempt, 10)).
	AttemptID func(q affinity.Quarantine) string
	// Prefix is the path the ledger's Handler is mounted under ("" for
	// none).
	Prefix string
}

// nowKey is the context key of ContextWithNow's clock.
type nowKey struct{}

// ContextWithNow returns ctx carrying the router's clock: a Resolver calls
// its Status with it (its Source's Now), and HTTPStatus reads it when its
// HTTPConfig.Now is nil. A host that calls a Status itself may do the same.
func ContextWithNow(ctx context.Context, now func() time.Duration) context.Context {
	return context.WithValue(ctx, nowKey{}, now)
}

// nowFrom returns the clock ContextWithNow put in ctx, or nil.
func nowFrom(ctx context.Context) func() time.Duration {
	now, _ := ctx.Value(nowKey{}).(func() time.Duration)
	return now
}

// HTTPStatus returns a Status that asks the Ledger of q's target, at
// baseURL(q.Target)+Prefix+"/attempts/{id}?age_ms=A&fence=1", whether the
// attempt arrived. A, the attempt's greatest possible age, is Now minus
// the attempt's dispatch time (q.DispatchedAt, or Since - DispatchTimeout
// if later), rounded up to a millisecond. "arrived" is Arrived,
// "not-arrived" NotArrived, "unknown" Unknown, except that an unknown
// answer which fenced the attempt is NotArrived when the attempt was
// dispatched within the window the ledger covered (its CoveredMS before
// the answer): the question's round trip, read on the router's clock
// before the age and after the answer, places that window on the
// router's timeline, within MaxDrift and ClockMargin. So a young ledger
// (one that started less than its Slack before the dispatch) answers as
// soon as the attempt is quarantined. An answer from an instance other
// than q.Identity is an *IdentityError, a status other than 200 or an
// unreadable body an *AnswerError, and a transport failure the client's
// error: each counts as Unknown.
func HTTPStatus(client *http.Client, baseURL func(affinity.Target) string, cfg HTTPConfig) Status {
	if client == nil {
		client = http.DefaultClient
	}
	if cfg.DispatchTimeout <= 0 {
		cfg.DispatchTimeout = placement.DefaultDispatchTimeout
	}
	if cfg.MaxDrift <= 0 {
		cfg.MaxDrift = DefaultMaxDrift
	}
	if cfg.ClockMargin <= 0 {
		cfg.ClockMargin = DefaultClockMargin
	}
	if cfg.AttemptID == nil {
		cfg.AttemptID = func(q affinity.Quarantine) string { return strconv.FormatUint(q.Attempt, 10) }
	}
	return func(ctx context.Context, q affinity.Quarantine) (Verdict, error) {
		if baseURL == nil {
			return Unknown, errors.New("resolver: HTTPStatus has no baseURL")
		}
		id := cfg.AttemptID(q)
		u := baseURL(q.Target) + cfg.Prefix + "/attempts/" + url.PathEscape(id)
		now := cfg.Now
		if now == nil {
			now = nowFrom(ctx)
		}
		// The attempt was sent at or after its dispatch, and its dispatch
		// was at most DispatchTimeout before its quarantine began.
		dispatched := max(q.DispatchedAt, q.Since-cfg.DispatchTimeout)
		if now != nil {
			age := now() - dispatched
			ms := (age + time.Millisecond - 1) / time.Millisecond // rounded up
			u += "?age_ms=" + strconv.FormatInt(int64(max(ms, 0)), 10) + "&fence=1"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return Unknown, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return Unknown, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			return Unknown, err
		}
		if resp.StatusCode != http.StatusOK {
			return Unknown, &AnswerError{StatusCode: resp.StatusCode, Reason: "status is not 200"}
		}
		var a Answer
		if err := json.Unmarshal(body, &a); err != nil {
			return Unknown, &AnswerError{StatusCode: resp.StatusCode, Reason: err.Error()}
		}
		if a.ID != id {
			return Unknown, &AnswerError{StatusCode: resp.StatusCode, Reason: fmt.Sprintf("answer names attempt %q, asked %q", a.ID, id)}
		}
		if a.Identity != q.Identity {
			return Unknown, &IdentityError{Want: q.Identity, Got: a.Identity}
		}
		switch a.State {
		case StateArrived:
			return Arrived, nil
		case StateNotArrived:
			return NotArrived, nil
		case StateUnknown:
			if now != nil && a.Fenced {
				// The ledger read its clock before now(): the window it
				// covered began at most covered before now() on the
				// router's timeline (less the two clocks' drift and this
				// clock's resolution). The attempt dispatched after that
				// began did not arrive, and is fenced: it never will.
				covered := time.Duration(a.CoveredMS) * time.Millisecond
				since := now() - dispatched
				if since+time.Duration(float64(since)*cfg.MaxDrift)+cfg.ClockMargin < covered-time.Duration(float64(covered)*cfg.MaxDrift) {
					return NotArrived, nil
				}
			}
			return Unknown, nil
		}
		return Unknown, &AnswerError{StatusCode: resp.StatusCode, Reason: fmt.Sprintf("unknown state %q", a.State)}
	}
}
