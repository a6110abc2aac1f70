package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// MaxTraceLine bounds one JSONL line of a trace, in bytes.
const MaxTraceLine = 16 << 20

// WriteTrace writes w as JSONL: one Request per line, in order.
func (w *Workload) WriteTrace(out io.Writer) error {
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)
	for i := range w.Requests {
		if err := enc.Encode(&w.Requests[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadTrace reads a JSONL trace (one Request per line; blank lines are
// skipped) and checks it: unique non-negative ids, a session on every
// line, After naming only earlier lines, either Prompt or Blocks (not
// both), token counts that are positive (Prompt's sum equal to
// InputTokens when both are given), and no negative times. Errors are
// *TraceError.
func ReadTrace(in io.Reader) (*Workload, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), MaxTraceLine)
	w := &Workload{}
	seen := map[int]bool{}
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(trimSpace(b)) == 0 {
			continue
		}
		var r Request
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, &TraceError{Line: line, Reason: err.Error()}
		}
		if err := checkRequest(&r, seen); err != "" {
			return nil, &TraceError{Line: line, Reason: err}
		}
		seen[r.ID] = true
		w.Requests = append(w.Requests, r)
	}
	if err := sc.Err(); err != nil {
		return nil, &TraceError{Line: line + 1, Reason: err.Error()}
	}
	if len(w.Requests) == 0 {
		return nil, &TraceError{Line: line, Reason: "no requests"}
	}
	return w, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// checkRequest validates r against the lines before it (seen ids) and
// fills InputTokens from Prompt when absent. It returns the reason r is
// invalid, or "".
func checkRequest(r *Request, seen map[int]bool) string {
	switch {
	case r.ID < 0:
		return "negative id"
	case seen[r.ID]:
		return fmt.Sprintf("duplicate id %d", r.ID)
	case r.Session == "":
		return "no session"
	case r.AtMS < 0 || r.ThinkMS < 0:
		return "negative time"
	case r.OutputTokens < 1:
		return "output_tokens must be at least 1"
	case len(r.Prompt) > 0 && len(r.Blocks) > 0:
		return "both prompt and blocks"
	case len(r.Prompt) == 0 && len(r.Blocks) == 0 && r.InputTokens < 1:
		return "no prompt: give prompt, blocks or input_tokens"
	}
	for _, d := range r.After {
		if !seen[d] {
			return fmt.Sprintf("after names %d, which is not an earlier line", d)
		}
	}
	if len(r.Prompt) > 0 {
		sum := 0
		for _, s := range r.Prompt {
			if s.Stream == "" || s.Tokens < 1 {
				return "a prompt segment needs a stream and at least 1 token"
			}
			sum += s.Tokens
			if sum > 1<<30 {
				return "prompt too long"
			}
		}
		if r.InputTokens == 0 {
			r.InputTokens = sum
		} else if r.InputTokens != sum {
			return fmt.Sprintf("input_tokens %d differs from the prompt's %d", r.InputTokens, sum)
		}
	}
	if r.InputTokens < 1 || r.InputTokens > 1<<30 {
		return "input_tokens out of range"
	}
	return ""
}
