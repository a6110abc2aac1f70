package httpoutcome

import (
	"fmt"

	"github.com/placementlab/placement/impl/placement"
)

// Table maps a worker's response status to the outcome of the attempt, read
// when the response headers arrive (before any body). The zero Table is the
// default table (the package doc has it, with a reason for every row); With
// overrides one status. A Table is a small value: copy it freely.
type Table struct {
	// rows[code-minStatus] is the outcome set by With; zero means the
	// default row.
	rows [maxStatus - minStatus + 1]placement.Outcome
}

const (
	minStatus = 100
	maxStatus = 599
)

// With returns a copy of t in which status code maps to o. The code must be
// 100 to 599 and o one of placement.Accepted, DefinitelyNotAccepted or
// Ambiguous; otherwise With returns t unchanged and an error matching
// placement.ErrInvalidArgument.
func (t Table) With(code int, o placement.Outcome) (Table, error) {
	if code < minStatus || code > maxStatus {
		return t, fmt.Errorf("%w: httpoutcome: status %d is outside 100..599", placement.ErrInvalidArgument, code)
	}
	if !validOutcome(o) {
		return t, fmt.Errorf("%w: httpoutcome: unknown outcome %d for status %d", placement.ErrInvalidArgument, o, code)
	}
	t.rows[code-minStatus] = o
	return t, nil
}

// Outcome returns the outcome t gives a response with status code: the row
// With set, else the default row. A code outside 100..599 (not an HTTP
// status: Go's transport accepts any three digits) is Ambiguous.
func (t Table) Outcome(code int) placement.Outcome {
	if code < minStatus || code > maxStatus {
		return placement.Ambiguous
	}
	if o := t.rows[code-minStatus]; o != 0 {
		return o
	}
	return defaultOutcome(code)
}

// defaultOutcome is the default table (the package doc's, row by row).
func defaultOutcome(code int) placement.Outcome {
	switch code {
	case 408, 421, 425, 429, 503:
		return placement.DefinitelyNotAccepted
	case 500, 501, 505:
		return placement.Accepted
	}
	if code >= 500 {
		return placement.Ambiguous
	}
	return placement.Accepted
}

func validOutcome(o placement.Outcome) bool {
	return o == placement.Accepted || o == placement.DefinitelyNotAccepted || o == placement.Ambiguous
}
