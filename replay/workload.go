package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Segment is a run of tokens in a prompt: the first Tokens tokens of the
// named token stream Stream. Two prompts share a prefix exactly as far as
// their segment lists agree: the same streams, in the same order, with the
// shorter of two equal-stream segments a prefix of the longer.
type Segment struct {
	Stream string `json:"stream"`
	Tokens int    `json:"tokens"`
}

// Request is one LLM call of a workload: one line of a JSONL trace.
//
// A request waits for the requests listed in After (closed-loop replay:
// it is sent ThinkMS after the last of them completed) or is sent at AtMS
// (open-loop replay, and closed-loop replay of a request with no After).
// Its prompt is either Prompt (segments: the simulator derives the prefix
// blocks) or Blocks (the prefix block hashes, one per full block, as a
// trace of real traffic records them); its output continues the last
// segment's stream, so a later call whose prompt extends that stream
// reuses the output's blocks too.
type Request struct {
	// ID names the request; After refers to earlier requests by ID.
	ID int `json:"id"`
	// Session is the conversation the request belongs to (the session id
	// a client sends). A subagent's conversation has its own Session.
	Session string `json:"session"`
	// Parent, when set, makes the request a subagent's: it is routed under
	// the sibling group of the Parent session (affinity.Namespace's
	// SiblingGroup), shared by all of Parent's subagents.
	Parent string `json:"parent,omitempty"`
	// AtMS is when the request is sent, in milliseconds from the start
	// (open loop; closed loop for a request with no After).
	AtMS int64 `json:"at_ms"`
	// After lists the requests this one waits for in closed-loop replay.
	After []int `json:"after,omitempty"`
	// ThinkMS is the think or tool time after the last of After completed.
	ThinkMS int64 `json:"think_ms,omitempty"`
	// Prompt is the prompt as segments (or nil when Blocks is given).
	Prompt []Segment `json:"prompt,omitempty"`
	// Blocks are the prompt's prefix block hashes, one per full block of
	// Config.BlockTokens tokens (or nil when Prompt is given).
	Blocks []uint64 `json:"blocks,omitempty"`
	// InputTokens is the prompt's length in tokens (the sum of Prompt's
	// segments when Prompt is given).
	InputTokens int `json:"input_tokens"`
	// OutputTokens is the response's length in tokens.
	OutputTokens int `json:"output_tokens"`
	// Final marks the session's final request.
	Final bool `json:"final,omitempty"`
}

// Workload is a replayable list of requests, in an order where every
// request comes after the requests it waits for.
type Workload struct {
	Requests []Request
}

// Span returns the latest AtMS of the workload, as a duration.
func (w *Workload) Span() time.Duration {
	var m int64
	for i := range w.Requests {
		m = max(m, w.Requests[i].AtMS)
	}
	return time.Duration(m) * time.Millisecond
}

// WorkloadParams configures Generate. The defaults (DefaultWorkload) come
// from the published figures in shared/reference/placement-quality.md.
type WorkloadParams struct {
	// Sessions is how many top-level agent sessions to generate.
	Sessions int
	// SessionRate is the sessions' arrival rate per second (Poisson).
	SessionRate float64
	// SystemTokens is the system prompt every session and subagent shares.
	SystemTokens int
	// UserTurnsMean is the mean user turns per session (1 + Poisson).
	UserTurnsMean float64
	// CallsPerTurnMean is the mean LLM calls per user turn (1 + Poisson).
	CallsPerTurnMean float64
	// AppendMean is the mean tokens a call appends to its conversation
	// (lognormal, sigma AppendSigma).
	AppendMean  float64
	AppendSigma float64
	// OutputMean is the mean output tokens of a call (lognormal, sigma
	// OutputSigma).
	OutputMean  float64
	OutputSigma float64
	// ToolTimeMean is the mean tool (or think) time between two calls of a
	// turn (lognormal, sigma 1, clipped to ToolTimeMin..ToolTimeMax).
	ToolTimeMean, ToolTimeMin, ToolTimeMax time.Duration
	// TurnGapMedian is the median gap between user turns (lognormal, sigma
	// TurnGapSigma, clipped to TurnGapMax).
	TurnGapMedian time.Duration
	TurnGapSigma  float64
	TurnGapMax    time.Duration
	// FanoutProb is the probability that a top-level call fans out to
	// subagents; each fan-out has 2 + Poisson(FanoutMean-2) subagents,
	// each making 1 + Poisson(SubagentCallsMean-1) calls. Subagents fork
	// the parent's context: their prompts begin with the parent's prompt
	// and output so far, which the sibling group shares.
	FanoutProb        float64
	FanoutMean        float64
	SubagentCallsMean float64
	// NominalTTFT and NominalTokenTime give the open-loop timestamps: a
	// request's AtMS is its dependencies' AtMS plus their nominal service
	// (NominalTTFT + OutputTokens x NominalTokenTime) plus its think time.
	NominalTTFT, NominalTokenTime time.Duration
	// Seed seeds the generator (math/rand/v2 PCG).
	Seed uint64
}

// DefaultWorkload returns the default workload parameters: agentic coding
// sessions as placement-quality.md describes them (3.95 user turns of 7.8
// calls, a 3,000-token system prompt, appended input lognormal mean 1,500,
// output mean 425, tool time lognormal mean 15 s within 1-100 s, gaps
// between user turns with median 1.6 s and mean 37 s).
func DefaultWorkload() WorkloadParams {
	return WorkloadParams{
		Sessions:          240,
		SessionRate:       0.4,
		SystemTokens:      3000,
		UserTurnsMean:     3.95,
		CallsPerTurnMean:  7.8,
		AppendMean:        1500,
		AppendSigma:       1.0,
		OutputMean:        425,
		OutputSigma:       0.8,
		ToolTimeMean:      15 * time.Second,
		ToolTimeMin:       time.Second,
		ToolTimeMax:       100 * time.Second,
		TurnGapMedian:     1600 * time.Millisecond,
		TurnGapSigma:      2.5,
		TurnGapMax:        20 * time.Minute,
		FanoutProb:        0.05,
		FanoutMean:        3,
		SubagentCallsMean: 5,
		NominalTTFT:       time.Second,
		NominalTokenTime:  20 * time.Millisecond,
		Seed:              1,
	}
}

func (p WorkloadParams) validate() error {
	bad := func(field, reason string) error {
		return &ParamError{Field: field, Reason: reason}
	}
	switch {
	case p.Sessions < 1:
		return bad("Sessions", "must be at least 1")
	case !(p.SessionRate > 0) || math.IsInf(p.SessionRate, 0):
		return bad("SessionRate", "must be positive and finite")
	case p.SystemTokens < 0:
		return bad("SystemTokens", "must not be negative")
	case !(p.UserTurnsMean >= 1) || p.UserTurnsMean > 1000:
		return bad("UserTurnsMean", "must be in [1, 1000]")
	case !(p.CallsPerTurnMean >= 1) || p.CallsPerTurnMean > 1000:
		return bad("CallsPerTurnMean", "must be in [1, 1000]")
	case !(p.AppendMean >= 1) || p.AppendMean > 1e7 || !(p.AppendSigma >= 0) || p.AppendSigma > 4:
		return bad("AppendMean", "mean must be in [1, 1e7] and sigma in [0, 4]")
	case !(p.OutputMean >= 1) || p.OutputMean > 1e7 || !(p.OutputSigma >= 0) || p.OutputSigma > 4:
		return bad("OutputMean", "mean must be in [1, 1e7] and sigma in [0, 4]")
	case p.ToolTimeMean <= 0 || p.ToolTimeMin < 0 || p.ToolTimeMax < p.ToolTimeMin:
		return bad("ToolTimeMean", "mean must be positive and 0 <= min <= max")
	case p.TurnGapMedian <= 0 || !(p.TurnGapSigma >= 0) || p.TurnGapSigma > 4 || p.TurnGapMax <= 0:
		return bad("TurnGapMedian", "median and max must be positive and sigma in [0, 4]")
	case !(p.FanoutProb >= 0 && p.FanoutProb <= 1):
		return bad("FanoutProb", "must be in [0, 1]")
	case p.FanoutProb > 0 && (!(p.FanoutMean >= 2) || p.FanoutMean > 64):
		return bad("FanoutMean", "must be in [2, 64]")
	case p.FanoutProb > 0 && (!(p.SubagentCallsMean >= 1) || p.SubagentCallsMean > 1000):
		return bad("SubagentCallsMean", "must be in [1, 1000]")
	case p.NominalTTFT < 0 || p.NominalTokenTime < 0:
		return bad("NominalTTFT", "must not be negative")
	}
	return nil
}

// gen draws the workload's random quantities from one seeded stream.
type gen struct {
	p   WorkloadParams
	rng *rand.Rand
}

// lognormal draws a lognormal value with the given mean and sigma.
func (g *gen) lognormal(mean, sigma float64) float64 {
	mu := math.Log(mean) - sigma*sigma/2
	return math.Exp(mu + sigma*g.rng.NormFloat64())
}

// poisson draws a Poisson count with mean lambda (Knuth's method, split
// for large means).
func (g *gen) poisson(lambda float64) int {
	n := 0
	for lambda > 30 {
		n += g.poisson(30)
		lambda -= 30
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= g.rng.Float64()
		if p <= l {
			return n + k
		}
		k++
	}
}

func (g *gen) tokens(mean, sigma float64) int {
	return max(1, int(math.Round(g.lognormal(mean, sigma))))
}

func (g *gen) toolTime() time.Duration {
	d := time.Duration(g.lognormal(float64(g.p.ToolTimeMean), 1))
	return min(max(d, g.p.ToolTimeMin), g.p.ToolTimeMax)
}

func (g *gen) turnGap() time.Duration {
	d := time.Duration(float64(g.p.TurnGapMedian) * math.Exp(g.p.TurnGapSigma*g.rng.NormFloat64()))
	return min(d, g.p.TurnGapMax)
}

// Generate returns a synthetic agentic workload: sessions arriving as a
// Poisson process, each with user turns of several LLM calls separated by
// tool times, the conversation growing by each call's appended input and
// output, and subagent fan-outs whose siblings share the parent's context
// and a sibling group. The same params (Seed included) give the same
// workload.
func Generate(p WorkloadParams) (*Workload, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	g := &gen{p: p, rng: rand.New(rand.NewPCG(p.Seed, 0x5e551015))}
	w := &Workload{}
	at := make(map[int]time.Duration) // nominal send time by id
	done := func(id int) time.Duration {
		r := &w.Requests[id]
		return at[id] + p.NominalTTFT + time.Duration(r.OutputTokens)*p.NominalTokenTime
	}
	add := func(r Request, start time.Duration) int {
		r.ID = len(w.Requests)
		t := start
		for _, d := range r.After {
			t = max(t, done(d)+time.Duration(r.ThinkMS)*time.Millisecond)
		}
		at[r.ID] = t
		r.AtMS = t.Milliseconds()
		for _, s := range r.Prompt {
			r.InputTokens += s.Tokens
		}
		w.Requests = append(w.Requests, r)
		return r.ID
	}
	sys := Segment{Stream: "sys", Tokens: p.SystemTokens}
	prompt := func(segs ...Segment) []Segment {
		out := make([]Segment, 0, len(segs)+1)
		if sys.Tokens > 0 {
			out = append(out, sys)
		}
		for _, s := range segs {
			if s.Tokens > 0 {
				out = append(out, s)
			}
		}
		return out
	}
	var start time.Duration
	for s := range p.Sessions {
		start += time.Duration(g.rng.ExpFloat64() / p.SessionRate * float64(time.Second))
		sid := fmt.Sprintf("s%05d", s)
		turns := 1 + g.poisson(p.UserTurnsMean-1)
		var deps []int
		var think time.Duration
		ctxLen, last := 0, -1
		for turn := range turns {
			calls := 1 + g.poisson(p.CallsPerTurnMean-1)
			for call := range calls {
				ctxLen += g.tokens(p.AppendMean, p.AppendSigma)
				out := g.tokens(p.OutputMean, p.OutputSigma)
				id := add(Request{
					Session: sid, After: deps, ThinkMS: think.Milliseconds(),
					Prompt:       prompt(Segment{Stream: sid, Tokens: ctxLen}),
					OutputTokens: out,
				}, start)
				last = id
				ctxLen += out
				deps = []int{id}
				if call < calls-1 {
					think = g.toolTime()
				} else {
					think = g.turnGap()
				}
				lastCall := turn == turns-1 && call == calls-1
				if lastCall || g.rng.Float64() >= p.FanoutProb {
					continue
				}
				k := 2 + g.poisson(p.FanoutMean-2)
				var ends []int
				for a := range k {
					aid := fmt.Sprintf("%s.t%dc%d.a%d", sid, turn, call, a)
					n := 1 + g.poisson(p.SubagentCallsMean-1)
					subDeps, subThink, subLen := []int{id}, time.Duration(0), 0
					for range n {
						subLen += g.tokens(p.AppendMean, p.AppendSigma)
						sout := g.tokens(p.OutputMean, p.OutputSigma)
						sid2 := add(Request{
							Session: aid, Parent: sid, After: subDeps, ThinkMS: subThink.Milliseconds(),
							Prompt:       prompt(Segment{Stream: sid, Tokens: ctxLen}, Segment{Stream: aid, Tokens: subLen}),
							OutputTokens: sout,
						}, start)
						subLen += sout
						subDeps, subThink = []int{sid2}, g.toolTime()
					}
					ends = append(ends, subDeps[0])
				}
				deps = ends
				think = g.toolTime()
			}
		}
		w.Requests[last].Final = true
	}
	return w, nil
}
