package httpoutcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// TestStatusTable: a case per row of the package doc's error table (and
// per error a row names), checked through Status and WriteError (status,
// Retry-After header, the JSON body's type); every row is covered.
func TestStatusTable(t *testing.T) {
	w := affinity.WorkerOnly("w")
	cases := []struct {
		row   string
		err   error
		code  int
		retry time.Duration
	}{
		{"outcome_unknown", &affinity.UnknownOutcomeError{Target: w}, 504, 0},
		{"outcome_unknown", &affinity.UnknownOutcomeError{Target: w, Attempt: 3, Quarantine: &affinity.QuarantinedError{RetryAfter: time.Minute}}, 504, 0},
		{"outcome_unknown", &ForwardError{Outcome: placement.Ambiguous, Written: true, Err: context.DeadlineExceeded}, 504, 0},
		{"outcome_unknown", &placement.FencedError{Attempt: 7, Generation: 1}, 504, 0},
		{"quarantined", &affinity.QuarantinedError{Target: w, RetryAfter: 2500 * time.Millisecond}, 503, 2500 * time.Millisecond},
		{"quarantined", fmt.Errorf("start: %w", &affinity.QuarantinedError{Target: w}), 503, DefaultRetryAfter},
		{"quarantined", &placement.AmbiguousError[string]{Key: "k"}, 503, DefaultRetryAfter},
		{"timeout", context.DeadlineExceeded, 504, 0},
		{"timeout", fmt.Errorf("x: %w", placement.ErrDispatchTimeout), 504, 0},
		{"timeout", &ForwardError{Outcome: placement.DefinitelyNotAccepted, Err: context.DeadlineExceeded}, 504, 0},
		{"cancelled", context.Canceled, StatusClientClosedRequest, 0},
		{"cancelled", placement.ErrCancelled, StatusClientClosedRequest, 0},
		{"cancelled", &ForwardError{Outcome: placement.DefinitelyNotAccepted, Err: context.Canceled}, StatusClientClosedRequest, 0},
		{"worker_unreachable", &ForwardError{Outcome: placement.DefinitelyNotAccepted, Err: syscall.ECONNREFUSED}, 502, DefaultRetryAfter},
		{"not_accepted", placement.ErrNotAccepted, 503, DefaultRetryAfter},
		{"no_candidates", affinity.ErrNoCandidates, 503, DefaultRetryAfter},
		{"pinned_worker_overloaded", &affinity.IneligibleError{Target: w, Cause: affinity.ErrPinnedWorkerOverloaded}, 503, DefaultRetryAfter},
		{"pinned_worker_gone", &affinity.IneligibleError{Target: w, Cause: affinity.ErrPinnedWorkerGone}, 503, DefaultRetryAfter},
		{"pinned_worker_not_allowed", &affinity.IneligibleError{Target: w, Cause: affinity.ErrPinnedWorkerNotAllowed}, 409, 0},
		{"pin_conflict", &affinity.PinError{Pin: w, Binding: affinity.WorkerOnly("v"), Reason: "x"}, 409, 0},
		{"binding_mismatch", &affinity.MismatchError{Binding: w, Dispatch: affinity.WorkerOnly("v")}, 409, 0},
		{"invalid_pin", &affinity.PinError{Pin: affinity.Ranked("w", -1), Reason: "negative rank"}, 400, 0},
		{"invalid_session_id", &affinity.SessionIDError{Reason: "empty"}, 400, 0},
		{"closed", placement.ErrClosed, 503, DefaultRetryAfter},
		{"busy", &placement.CapacityError{MaxEntries: 1}, 503, DefaultRetryAfter},
		{"busy", placement.ErrTooManyLeases, 503, DefaultRetryAfter},
		{"busy", placement.ErrReservationLost, 503, DefaultRetryAfter},
		{"busy", placement.ErrWouldWait, 503, DefaultRetryAfter},
		{"internal", affinity.ErrTurnEnded, 500, 0},
		{"internal", placement.ErrInvalidArgument, 500, 0},
		{"internal", errors.New("something else"), 500, 0},
	}
	covered := map[string]bool{}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%02d-%s", i, tc.row), func(t *testing.T) {
			code, retry := Status(tc.err)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.retry, retry)

			rw := httptest.NewRecorder()
			WriteError(rw, tc.err)
			assert.Equal(t, tc.code, rw.Code)
			if tc.retry > 0 {
				assert.Equal(t, fmt.Sprint(retryAfterSeconds(tc.retry)), rw.Header().Get("Retry-After"))
			} else {
				assert.Empty(t, rw.Header().Values("Retry-After"))
			}
			assert.Equal(t, "application/json", rw.Header().Get("Content-Type"))
			var body struct {
				Error struct {
					Message, Type string
					Code          int
				}
			}
			require.NoError(t, json.Unmarshal(rw.Body.Bytes(), &body))
			assert.Equal(t, tc.row, body.Error.Type)
			assert.Equal(t, tc.code, body.Error.Code)
			assert.NotEmpty(t, body.Error.Message)
			assert.NotContains(t, rw.Body.String(), tc.err.Error(), "the error's own text is not sent")
		})
		covered[tc.row] = true
	}
	for _, r := range append(statusRows, defaultRow) {
		assert.True(t, covered[r.name], "row %s has no case", r.name)
	}
}

// TestStatusNil: no error is 200, and WriteError writes nothing.
func TestStatusNil(t *testing.T) {
	code, retry := Status(nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Zero(t, retry)
	rw := httptest.NewRecorder()
	WriteError(rw, nil)
	assert.False(t, rw.Flushed)
	assert.Empty(t, rw.Header())
	assert.Empty(t, rw.Body.String())
	WriteError(nil, errors.New("x")) // no panic
}

// TestRetryAfterSeconds: whole seconds, rounded up, at least one, no
// overflow.
func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		1: 1, time.Millisecond: 1, time.Second: 1, time.Second + 1: 2, 2500 * time.Millisecond: 3,
		10 * time.Minute: 600, 1<<63 - 1: 9223372037,
	} {
		assert.Equal(t, want, retryAfterSeconds(d), "%v", d)
	}
}
