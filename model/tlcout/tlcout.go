// Package tlcout reads what TLC prints, for the model explorers that are
// compared with it (package model for spec/tla/MCPlacement.tla, package
// model/claims for spec/tla/MCClaims.tla): TLC's standard output, summed up
// as a Result that spec/tla/tlc.sh records as JSON in spec/tla/results, and
// TLA+ values and states as TLC prints them in traces and -dump files. It
// knows nothing of either model: each decodes the parsed values into its own
// states.
package tlcout

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Result is what TLC reported for one config, as recorded in
// spec/tla/results/<config>.json.
type Result struct {
	Config       string     `json:"config"`
	TLCVersion   string     `json:"tlc_version"`
	Workers      int        `json:"workers"`
	Distinct     int64      `json:"distinct"`
	Generated    int64      `json:"generated"`
	Depth        int        `json:"depth"`
	Seconds      int        `json:"tlc_seconds"`
	StateSetHash string     `json:"state_set_hash,omitempty"`
	Violation    *Violation `json:"violation"`
}

// Violation is what TLC reported violated.
type Violation struct {
	Property    string `json:"property"`
	Kind        string `json:"kind"` // "invariant", "action property" or "liveness"
	TraceLength int    `json:"trace_length"`
}

// ErrUnfinished is returned (wrapped) by ParseOutput for output in which
// TLC reported no state counts: it did not finish.
var ErrUnfinished = errors.New("TLC did not finish (no state counts in its output)")

var (
	reCounts    = regexp.MustCompile(`^([\d,]+) states generated, ([\d,]+) distinct states found`)
	reDepth     = regexp.MustCompile(`depth of the complete state graph search is (\d+)`)
	reViolation = regexp.MustCompile(`^Error: (Invariant|Action property|Temporal property) (\w+) (?:is|was) violated`)
	reState     = regexp.MustCompile(`^State \d+: `)
	reVersion   = regexp.MustCompile(`^TLC2 Version (\S+)`)
	reFinished  = regexp.MustCompile(`^Finished in (?:(\d+)min )?(\d+)s`)
	reWorkers   = regexp.MustCompile(`with (\d+) workers?`)
)

var violationKinds = map[string]string{"Invariant": "invariant", "Action property": "action property",
	"Temporal property": "liveness"}

func num(s string) int64 {
	n, _ := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	return n
}

// ParseOutput reads TLC's standard output for the config named config: its
// version and workers, the state counts, the depth, the time it took and
// the violated property with the length of its trace, if any. Output
// without state counts is an ErrUnfinished.
func ParseOutput(r io.Reader, config string) (Result, error) {
	res := Result{Config: config}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if m := reVersion.FindStringSubmatch(line); m != nil {
			res.TLCVersion = m[1]
		}
		if m := reWorkers.FindStringSubmatch(line); m != nil && res.Workers == 0 {
			res.Workers, _ = strconv.Atoi(m[1])
		}
		if m := reCounts.FindStringSubmatch(line); m != nil {
			res.Generated, res.Distinct, done = num(m[1]), num(m[2]), true
		}
		if m := reDepth.FindStringSubmatch(line); m != nil {
			res.Depth, _ = strconv.Atoi(m[1])
		}
		if m := reFinished.FindStringSubmatch(line); m != nil {
			mins, _ := strconv.Atoi(m[1])
			secs, _ := strconv.Atoi(m[2])
			res.Seconds = mins*60 + secs
		}
		if m := reViolation.FindStringSubmatch(line); m != nil {
			res.Violation = &Violation{Property: m[2], Kind: violationKinds[m[1]]}
		}
		if res.Violation != nil && reState.MatchString(line) {
			res.Violation.TraceLength++
		}
	}
	if err := sc.Err(); err != nil {
		return Result{}, err
	}
	if !done {
		return Result{}, ErrUnfinished
	}
	return res, nil
}

// ReadResult reads a Result recorded by WriteResult.
func ReadResult(path string) (Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Result{}, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ResultPath is where spec/tla/tlc.sh records TLC's run of the config at
// cfg: results/<config name>.json beside it.
func ResultPath(cfg string) string {
	return filepath.Join(filepath.Dir(cfg), "results", strings.TrimSuffix(filepath.Base(cfg), ".cfg")+".json")
}

// WriteResult writes r to path as indented JSON, the format of
// spec/tla/results.
func WriteResult(path string, r Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// DiffCounts compares an explorer's counts and state-set hash with what TLC
// reported for a config that passes, and describes each difference; it
// returns nil when there is none.
func (r *Result) DiffCounts(distinct int, generated int64, depth int, hash string) []string {
	var out []string
	if int64(distinct) != r.Distinct || generated != r.Generated || depth != r.Depth {
		out = append(out, fmt.Sprintf("explorer found %d distinct / %d generated / depth %d; TLC %d / %d / %d",
			distinct, generated, depth, r.Distinct, r.Generated, r.Depth))
	}
	if r.StateSetHash == "" {
		out = append(out, fmt.Sprintf("TLC data for %s has no state-set hash", r.Config))
	} else if hash != r.StateSetHash {
		out = append(out, fmt.Sprintf("state sets differ: explorer %s, TLC %s", hash, r.StateSetHash))
	}
	return out
}

// Compare compares what an explorer found for a config with what TLC
// reported, and describes each difference; it returns nil when there is
// none. violation is the explorer's (nil for none), its TraceLength the
// states in its shortest trace. For a config TLC passes, the explorer must
// pass with the same counts, depth and state set (DiffCounts); for one TLC
// fails, it must find the same property of the same kind violated, with a
// trace as long as TLC's unless the property is a liveness one (TLC's
// liveness counterexamples are not shortest; its safety ones are).
func (r *Result) Compare(distinct int, generated int64, depth int, hash string, violation *Violation) []string {
	switch {
	case r.Violation == nil && violation != nil:
		return []string{fmt.Sprintf("explorer: %s %s violated, TLC found no error", violation.Kind, violation.Property)}
	case r.Violation == nil:
		return r.DiffCounts(distinct, generated, depth, hash)
	case violation == nil:
		return []string{fmt.Sprintf("explorer found no violation; TLC reports %s %s", r.Violation.Kind, r.Violation.Property)}
	case violation.Property != r.Violation.Property || violation.Kind != r.Violation.Kind:
		return []string{fmt.Sprintf("explorer: %s %s violated; TLC: %s %s", violation.Kind, violation.Property,
			r.Violation.Kind, r.Violation.Property)}
	case r.Violation.Kind != "liveness" && violation.TraceLength != r.Violation.TraceLength:
		return []string{fmt.Sprintf("explorer trace has %d states, TLC's %d", violation.TraceLength, r.Violation.TraceLength)}
	}
	return nil
}
