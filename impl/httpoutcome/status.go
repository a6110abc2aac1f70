package httpoutcome

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// DefaultRetryAfter is the Retry-After Status gives where a retry can
// succeed but the error does not say when.
const DefaultRetryAfter = time.Second

// StatusClientClosedRequest (499, nginx's convention) is the status for a
// request whose client went away: nobody reads it, logs do.
const StatusClientClosedRequest = 499

// statusRow is one row of the package doc's error table.
type statusRow struct {
	name    string // the error body's "type"
	match   func(error) bool
	code    int
	retry   func(error) time.Duration // nil: no Retry-After
	message string                    // what the client reads
}

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func forward(o placement.Outcome) func(error) bool {
	return func(err error) bool {
		var fe *ForwardError
		return errors.As(err, &fe) && fe.Outcome == o
	}
}

func retryDefault(error) time.Duration { return DefaultRetryAfter }

func retryQuarantine(err error) time.Duration {
	var q *affinity.QuarantinedError
	if errors.As(err, &q) && q.RetryAfter > 0 {
		return q.RetryAfter
	}
	return DefaultRetryAfter
}

// statusRows is the error table, checked in order: the first row that
// matches decides. The package doc has it, with the reasons.
var statusRows = []statusRow{
	{"outcome_unknown", is(affinity.ErrOutcomeUnknown), http.StatusGatewayTimeout, nil,
		"the worker may have run the request but its answer did not arrive; it is not retried"},
	{"outcome_unknown", forward(placement.Ambiguous), http.StatusGatewayTimeout, nil,
		"the worker may have run the request but its answer did not arrive; it is not retried"},
	{"outcome_unknown", is(placement.ErrFenced), http.StatusGatewayTimeout, nil,
		"the worker may have run the request but its answer did not arrive; it is not retried"},
	{"quarantined", is(affinity.ErrQuarantined), http.StatusServiceUnavailable, retryQuarantine,
		"the session is quarantined after an attempt whose outcome is unknown"},
	{"quarantined", is(placement.ErrAmbiguous), http.StatusServiceUnavailable, retryDefault,
		"the session is quarantined after an attempt whose outcome is unknown"},
	{"timeout", func(err error) bool { return isTimeout(err) }, http.StatusGatewayTimeout, nil,
		"the request timed out"},
	{"cancelled", func(err error) bool {
		return errors.Is(err, context.Canceled) || errors.Is(err, placement.ErrCancelled)
	}, StatusClientClosedRequest, nil, "the request was cancelled"},
	{"worker_unreachable", forward(placement.DefinitelyNotAccepted), http.StatusBadGateway, retryDefault,
		"the worker could not be reached; the request was not sent"},
	{"not_accepted", is(placement.ErrNotAccepted), http.StatusServiceUnavailable, retryDefault,
		"the worker refused the request"},
	{"no_candidates", is(affinity.ErrNoCandidates), http.StatusServiceUnavailable, retryDefault,
		"no worker can take the request now"},
	{"pinned_worker_overloaded", is(affinity.ErrPinnedWorkerOverloaded), http.StatusServiceUnavailable, retryDefault,
		"the pinned worker is overloaded"},
	{"pinned_worker_gone", is(affinity.ErrPinnedWorkerGone), http.StatusServiceUnavailable, retryDefault,
		"the pinned worker is not available"},
	{"pinned_worker_not_allowed", is(affinity.ErrPinnedWorkerNotAllowed), http.StatusConflict, nil,
		"the pinned worker may not take this request"},
	{"pin_conflict", is(affinity.ErrPinConflict), http.StatusConflict, nil,
		"the pin disagrees with the session's binding"},
	{"binding_mismatch", is(affinity.ErrBindingMismatch), http.StatusConflict, nil,
		"the dispatch disagrees with the session's binding"},
	{"invalid_pin", is(affinity.ErrInvalidPin), http.StatusBadRequest, nil,
		"the pin is invalid"},
	{"invalid_session_id", is(affinity.ErrInvalidSessionID), http.StatusBadRequest, nil,
		"the session id is invalid"},
	{"closed", is(placement.ErrClosed), http.StatusServiceUnavailable, retryDefault,
		"the router is shutting down"},
	{"busy", func(err error) bool {
		return errors.Is(err, placement.ErrCapacity) || errors.Is(err, placement.ErrTooManyLeases) ||
			errors.Is(err, placement.ErrReservationLost) || errors.Is(err, placement.ErrWouldWait)
	}, http.StatusServiceUnavailable, retryDefault, "the router is busy with this session"},
}

var defaultRow = statusRow{name: "internal", code: http.StatusInternalServerError, message: "internal error"}

func rowFor(err error) statusRow {
	for _, r := range statusRows {
		if r.match(err) {
			return r
		}
	}
	return defaultRow
}

// Status maps an error of the affinity layer, the core, Do, or a context to
// the HTTP status a router answers with, and how long a client should wait
// before a retry (0: no Retry-After, because a retry cannot succeed soon or
// must not be automatic). The package doc's error table lists every row; an
// error no row matches is 500. Status(nil) is 200.
func Status(err error) (code int, retryAfter time.Duration) {
	if err == nil {
		return http.StatusOK, 0
	}
	r := rowFor(err)
	if r.retry != nil {
		retryAfter = r.retry(err)
	}
	return r.code, retryAfter
}

// WriteError answers a request with err's status (Status), a Retry-After
// header in whole seconds (rounded up) when Status gives one, and a JSON body
// in the OpenAI API's error shape: {"error":{"message","type","code"}}.
// The message is the row's fixed text, never err's (which can name workers):
// log err yourself. WriteError(w, nil) writes nothing.
func WriteError(w http.ResponseWriter, err error) {
	if err == nil || w == nil {
		return
	}
	r := rowFor(err)
	code, after := Status(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if after > 0 {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(after), 10))
	}
	w.WriteHeader(code)
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	body.Error.Message, body.Error.Type, body.Error.Code = r.message, r.name, code
	_ = json.NewEncoder(w).Encode(body)
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return max(s, 1)
}
