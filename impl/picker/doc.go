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
//     Observer, each pointer once even when it fills two roles.
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
// Configurations with a zero field take that field's default; a value out
// of range is a *ConfigError from the constructor, never a panic.
package picker
