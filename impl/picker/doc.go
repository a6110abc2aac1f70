// Package picker is the pipeline a router composes to choose a target for a
// session that needs placing: filters, then weighted scorers, then a picker,
// the shape of llm-d's EPP scheduling framework. A router runs it only when
// the affinity layer says the session needs placing (no binding or pin
// decided the target), over candidates already narrowed by the layer's
// eligibility (Turn.Eligible, converted with FromAffinity or
// FromAffinityLoads) and by the targets this request already tried
// (Exclude). After the dispatch, the router reports the outcome with
// Pipeline.Observe so that stateful parts (PrefixOverlap) learn.
//
// # The pipeline's contract
//
//   - Pick copies the candidates; filters run in order on the copy, each
//     returning a subset. No candidate given, or a filter leaving none,
//     ends the pick with an error matching ErrNoCandidates.
//   - Then each scorer with a weight > 0 writes a score per candidate into
//     a zeroed slice; the pipeline clamps each (NaN and negatives to 0,
//     above 1 to 1) and adds weight x score to the candidate's total. A
//     weight that is not a finite number >= 0, or a nil filter or scorer,
//     ends the pick with a *ConfigError (errors.Is ErrInvalidConfig) and no
//     part runs; Validate reports the same error up front.
//   - Then the picker chooses an index into the filtered candidates; out of
//     range is ErrBadPick. A nil Picker is HighestScore seeded by
//     Pipeline.Seed: the highest total, and among totals within a relative
//     1e-9 of it, for a request with a key the target that hashes lowest
//     with the key (rendezvous hashing: the same key and candidates always
//     give the same target, and different keys spread over tied targets,
//     instead of every new session going to the first candidate), for a
//     keyless request a uniform draw from the seeded generator.
//   - Observe tells every filter, scorer and picker that implements
//     Observer, each pointer once even when it fills two roles; a
//     FollowPrefix counts as the PrefixOverlap whose index it reads.
//   - Pick and Observe are safe for concurrent use, and the built-ins are
//     deterministic: the same seeds and the same sequence of calls give the
//     same picks (no map order, no clock, no unseeded randomness).
//
// Default is the common case: LeastInFlight and LeastBound weighted 1 each,
// the default picker.
//
// # Built-in parts
//
//   - LeastInFlight and LeastBound (scorers): min-max normalised inverse
//     load; the least loaded 1, the most 0, all 1 when equal. They leave
//     ties to the picker.
//   - DropOverloaded (filter): drops Overloaded candidates unless all are,
//     when it keeps them all (the scorers then weigh their loads).
//     MaxLoad does the same for a load at or above a limit.
//   - Exclude (function): drops the targets a request already tried.
//   - PrefixOverlap (scorer and picker): SGLang's cache_aware rule over an
//     LRU index of the prefix blocks accepted by each target; see its doc
//     for the rule, its defaults (sized for small clusters) and why it is
//     both.
//   - ConsistentHash (picker): consistent hashing with bounded loads; no
//     target's load goes above ceil(Factor x (total + 1) / n) once it counts
//     the request.
//
// # Cost and prefix-following parts
//
// A router that can estimate what a request would cost on each target (its
// time to first token there, say: the target's queued prefill plus the
// request's own uncached prefill) puts the estimate in Candidate.Cost;
// zero (or negative) means unknown, and the zero value of every existing
// Candidate is therefore unknown. Rules, each with its test:
//
//   - CostWithin{Slack} (filter) keeps, in order, the candidates whose
//     Cost is at most the least known Cost + Slack, and every candidate
//     whose Cost is unknown; with no known Cost it keeps all; a negative
//     Slack counts as 0; the sum saturates rather than overflows. As a
//     filter the cost cannot be outvoted by load scorers. [TestCostWithin,
//     TestPropCostWithin]
//   - MarkCostly(cands, t, slack) flags Overloaded the candidates whose
//     Target == t when their known Cost exceeds the least known Cost by
//     more than slack (negative: 0), reporting whether it flagged any; it
//     never clears a flag and never flags an unknown Cost. It is a soft
//     binding's cost rule: marked before Turn.Eligible, the binding's
//     target makes the affinity layer offer every target. It flags exactly
//     the candidates of t that CostWithin{slack} would drop.
//     [TestMarkCostly, TestPropCostWithin]
//   - PrefixOverlap.Match writes each candidate's matched leading blocks
//     (the match ratio's numerator). [TestPrefixMatch]
//   - FollowPrefix (filter, NewFollowPrefix over a PrefixOverlap's index):
//     with two or more candidates, when the longest match among them is at
//     least MinBlocks longer than the shortest, it keeps, in order, the
//     holders of the longest match whose load (Load, default in flight) is
//     at most LoadFactor x the candidates' mean + LoadSlack (defaults:
//     256 blocks, 1.25, 2); otherwise, or when every holder is busy, it
//     keeps all. It learns nothing itself: Pipeline.Observe tells its
//     index, once even when the index is also in the pipeline.
//     [TestFollowConfig, TestFollowPrefix, TestFollowPrefixObserve,
//     TestPropFollowPrefix]
//
// Placement's own scheduler, the one the replay's placement-hard and
// placement-soft rows measure (package replay), picks with these
// built-ins: DropOverloaded, CostWithin{Slack: 2 s}, FollowPrefix
// (MinBlocks 4,096 tokens' worth, LoadFactor 1.25, LoadSlack 2, in
// flight), then LeastInFlight and LeastBound weighted 1 each and the
// default picker (ExampleFollowPrefix); in soft mode it applies MarkCostly
// with the same slack to a bound request's binding. What the replay adds
// is what a router supplies: the Cost of each candidate (from its own
// estimate of each rank's prefill backlog: the uncached tokens of what it
// dispatched there and saw accepted, not yet at its first token, plus the
// request's uncached tokens there from the index), the Overloaded flags
// (in soft mode, waiting requests above 1.25x the mean + 4 when placing),
// and the hint that places a subagent group on its parent's binding.
//
// Configurations with a zero field take that field's default; a value out
// of range is a *ConfigError from the constructor, never a panic.
package picker
