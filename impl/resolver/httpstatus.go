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

// HTTPConfig configures HTTPStatus.
type HTTPConfig struct {
	// Now is the router's clock, the one Quarantine.Since is read on (the
	// layer's Now). With it, HTTPStatus sends the attempt's greatest
	// possible age (Now - Since + DispatchTimeout); without it (nil), it
	// sends none, and a ledger that does not remember the attempt answers
	// Unknown: nothing is ever resolved NotAccepted.
	Now func() time.Duration
	// DispatchTimeout is the layer's (zero: the core's default): the
	// attempt was sent at most this long before its quarantine began.
	DispatchTimeout time.Duration
	// AttemptID formats the id the router sent in the header; nil means
	// the decimal attempt id (strconv.FormatUint(q.Attempt, 10)).
	AttemptID func(q affinity.Quarantine) string
	// Prefix is the path the ledger's Handler is mounted under ("" for
	// none).
	Prefix string
}

// HTTPStatus returns a Status that asks the Ledger of q's target, at
// baseURL(q.Target)+Prefix+"/attempts/{id}", whether the attempt arrived.
// "arrived" is Arrived, "not-arrived" NotArrived, "unknown" Unknown; an
// answer from an instance other than q.Identity is an *IdentityError, a
// status other than 200 or an unreadable body an *AnswerError, and a
// transport failure the client's error: each counts as Unknown.
func HTTPStatus(client *http.Client, baseURL func(affinity.Target) string, cfg HTTPConfig) Status {
	if client == nil {
		client = http.DefaultClient
	}
	if cfg.DispatchTimeout <= 0 {
		cfg.DispatchTimeout = placement.DefaultDispatchTimeout
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
		if cfg.Now != nil {
			age := cfg.Now() - q.Since + cfg.DispatchTimeout
			ms := (age + time.Millisecond - 1) / time.Millisecond // rounded up
			u += "?age_ms=" + strconv.FormatInt(int64(max(ms, 0)), 10)
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
			return Unknown, nil
		}
		return Unknown, &AnswerError{StatusCode: resp.StatusCode, Reason: fmt.Sprintf("unknown state %q", a.State)}
	}
}
