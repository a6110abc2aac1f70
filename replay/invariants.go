package replay

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/placement"
)

// The invariants each placement policy's simulation checks as it runs
// (the package doc's "Invariants" says what each promises and what it
// leaves out). A violation is a sentence beginning with its invariant's
// name.
const (
	// InvLeaseLeaked: when the run ends, a turn the router started was
	// never ended, or a layer still holds entries once every idle
	// binding, reservation, dispatch and quarantine has had its time to
	// end.
	InvLeaseLeaked = "lease leaked"
	// InvDepartedWorker: a dispatch went to a worker that was not up (the
	// layer was told it failed or left), or to an old instance of a
	// restarted worker (a hit on a binding its restart fenced, or a pin
	// following a binding of the old instance).
	InvDepartedWorker = "routed to a departed worker"
	// InvTwoWorkers: a request of a routing key (session or sibling
	// group) started on one worker while the key's live binding was on
	// another worker that was running an accepted request of the key.
	InvTwoWorkers = "turn on two workers at once"
)

// MaxViolations is how many violations a Result keeps (the first ones, in
// simulated time order); Result.ViolationCount counts them all.
const MaxViolations = 20

// testBreak, set only by tests, breaks the simulation on purpose so that
// a test can see the invariants catch it (see breakOnce):
//
//	"skip-done"     the first accepted placement dispatch's turn is never
//	                ended (no Done: its lease is never released)
//	"departed"      the first placement dispatch made while a worker is
//	                failed or gone is sent to that worker
//	"unannounced"   a Restart is not told to the layers (they keep the old
//	                instance's bindings)
//	"split"         a dispatch whose key has an accepted request running on
//	                its worker is sent to another up worker instead (at
//	                most 3 times)
var testBreak string

// invState is a simulation's invariant bookkeeping.
type invState struct {
	// open holds the turns started and not yet ended: the request and
	// the replica.
	open map[affinity.Turn][2]int32
	// bind is each replica's binding of each key (by kid) as last seen
	// right after a turn ended, and when that turn refreshed it.
	bind [][]bindSeen
	// claim is Claims' live claim found when the current request was
	// routed (hard mode; nil: none, or not checked).
	claim *claim
	// pinGen is the instance of the binding a pinned request follows
	// (-1: not pinned).
	pinGen int
	broke  int // testBreak's uses
	// active counts each key's accepted requests queued or running;
	// concurrent counts the accepted requests that reached their worker
	// while another of their key was queued or running (where invariant 3
	// bites).
	active     []int32
	concurrent int
}

// bindSeen is a replica's binding of a key as the simulation saw it.
type bindSeen struct {
	w   *worker // nil: no binding known
	gen int
	at  time.Duration // the accepted dispatch that made or refreshed it
}

// splitCheck is a dispatch that went elsewhere than the key's binding
// expected it: checked when it reaches its worker.
type splitCheck struct {
	w     *worker // the binding's worker
	since time.Duration
	what  string // "the binding of replica k", "the live claim"
}

// initInvariants sizes the bookkeeping of a placement policy's simulation
// (after its replicas are built).
func (s *sim) initInvariants() {
	s.inv.open = map[affinity.Turn][2]int32{}
	s.inv.pinGen = -1
	s.inv.active = make([]int32, len(s.kak))
	s.inv.bind = make([][]bindSeen, len(s.reps))
	for k := range s.inv.bind {
		s.inv.bind[k] = make([]bindSeen, len(s.kak))
	}
}

// violate records a violation in res.
func violate(res *Result, format string, args ...any) {
	res.ViolationCount++
	if len(res.Violations) < MaxViolations {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
}

// secsAt formats a simulated time for a violation.
func secsAt(d time.Duration) string { return fmt.Sprintf("t=%.3fs", d.Seconds()) }

// instanceName names a worker's current instance.
func (w *worker) instanceName() string { return fmt.Sprintf("%s#%d", w.id, w.instance) }

// describe names request i for a violation: its id and session (and the
// sibling group's parent).
func (s *sim) describe(i int) string {
	r := &s.wl.Requests[i]
	if r.Parent != "" {
		return fmt.Sprintf("request %d (session %s, sibling group of %s)", r.ID, r.Session, r.Parent)
	}
	return fmt.Sprintf("request %d (session %s)", r.ID, r.Session)
}

// replicaName names replica k in a replicated run ("" for the single
// router).
func (s *sim) replicaName(k int) string {
	if s.rr2 == nil {
		return ""
	}
	return fmt.Sprintf(" by replica %d", k)
}

// turnStarted records a turn Start returned for request i on the current
// replica.
func (s *sim) turnStarted(t affinity.Turn, i int) {
	if s.inv.open != nil {
		s.inv.open[t] = [2]int32{int32(i), int32(s.cur)}
	}
}

// endTurn ends request i's turn t on replica rep (Done), unless a test
// breaks it, and then notes the key's binding on that replica (see
// sawBinding).
func (s *sim) endTurn(t affinity.Turn, i, rep int, accepted *rank, bound bool) {
	if s.breakOnce("skip-done", accepted != nil) {
		return
	}
	t.Done()
	delete(s.inv.open, t)
	s.sawBinding(i, rep, accepted, bound)
}

// breakOnce reports whether the test break named name applies now (once
// per simulation, when cond).
func (s *sim) breakOnce(name string, cond bool) bool {
	if testBreak != name || !cond || s.inv.broke > 0 {
		return false
	}
	s.inv.broke++
	return true
}

// sawBinding notes, right after request i's turn ended on replica rep,
// the key's binding there (Layer.Query). A dispatch accepted to accepted
// that bound the session or hit its binding (bound) made or refreshed
// it: its idle TTL runs from now. A binding on the worker already noted
// is kept as it was (not refreshed: an unknown outcome abandons the
// lease). Anything else, no binding or one this bookkeeping cannot
// explain (a resolver's Resolve bound it), is forgotten: no check relies
// on it.
func (s *sim) sawBinding(i, rep int, accepted *rank, bound bool) {
	if s.inv.bind == nil {
		return
	}
	b := &s.inv.bind[rep][s.kid[i]]
	q, ok := s.reps[rep].layer.Query(s.akeys[i], affinity.PhaseDecode)
	switch {
	case !ok:
		*b = bindSeen{}
	case accepted != nil && bound && q.Worker == accepted.w.id:
		*b = bindSeen{w: accepted.w, gen: accepted.w.gen, at: s.now}
	case b.w != nil && q.Worker == b.w.id:
	default:
		*b = bindSeen{}
	}
}

// endSession ends key's bindings on replica rep (Layer.EndSession): the
// consistency policies' adoption of another replica's binding.
func (s *sim) endSession(rep *replica, key int32) {
	_, _ = rep.layer.EndSession(s.kak[key])
	if s.inv.bind != nil {
		s.inv.bind[rep.idx][key] = bindSeen{}
	}
}

// checkDispatch checks a placement dispatch of request i to rk (h from
// the layer's Dispatch) before its outcome is reported: invariant 2 (the
// worker is up, and a hit or a pin is on its current instance), and for
// an accepted one invariant 3's first half (a dispatch elsewhere than the
// key's live binding, or Claims' live claim, is noted on the job and
// checked when it reaches its worker, in checkArrival).
func (s *sim) checkDispatch(i int, rk *rank, h handle, accepted bool) *splitCheck {
	w := rk.w
	s.res.InvariantChecks++
	switch {
	case w.state == stFailed:
		violate(&s.res, "%s: %s dispatched%s at %s to %s, which failed at %s", InvDepartedWorker, s.describe(i), s.replicaName(h.rep), secsAt(s.now), w.instanceName(), secsAt(w.downAt))
	case w.state == stGone:
		violate(&s.res, "%s: %s dispatched%s at %s to %s, which left at %s", InvDepartedWorker, s.describe(i), s.replicaName(h.rep), secsAt(s.now), w.id, secsAt(w.downAt))
	}
	b := s.inv.bind[h.rep][s.kid[i]]
	if h.hit && b.w == w && b.gen != w.gen {
		violate(&s.res, "%s: %s dispatched%s at %s as a hit on the binding to %s#%d, fenced by its restart as %s at %s", InvDepartedWorker, s.describe(i), s.replicaName(h.rep), secsAt(s.now), w.id, w.instance-(w.gen-b.gen), w.instanceName(), secsAt(w.downAt))
	}
	if h.pinGen >= 0 && h.pinGen != w.gen {
		violate(&s.res, "%s: %s dispatched%s at %s following a binding of an old instance of %s (now %s)", InvDepartedWorker, s.describe(i), s.replicaName(h.rep), secsAt(s.now), w.id, w.instanceName())
	}
	if !accepted {
		return nil
	}
	s.res.InvariantChecks++
	// Invariant 3, the replica's own binding. The layer's contract lets a
	// request go elsewhere when the binding's worker failed, left or
	// restarted since the binding was seen (rows B1, B2: its running
	// requests finish there), when the binding may have idled out (the
	// simulation ends each turn at its dispatch, so the idle TTL runs
	// while the request runs), and in soft mode when the binding's worker
	// was offered Overloaded (B4: the binding follows) or a pin named
	// another target (P4). A final request's close (F1), a quarantine
	// (none while bound) and a policy's EndSession leave no binding seen.
	if b.w != nil && b.w != w && s.bindingHolds(b) && !(s.pol == PlacementSoft && (h.pinGen >= 0 || s.offeredOverloaded(b.w))) {
		return &splitCheck{w: b.w, since: b.at, what: "the binding" + s.replicaName(h.rep)}
	}
	// Claims across replicas (hard mode): a turn follows the live claim
	// (R4), except in the store's outage window (placed locally, then
	// reconciled) and for EventDelay after a rewrite (another replica's
	// cache may still hold the previous revision).
	if c := s.inv.claim; c != nil && c.rk.w != w && !s.inOutage(s.now) && s.now-c.written >= s.rr2.cfg.EventDelay &&
		live(c.rk, c.gen) && c.rk.w.downAt < c.written {
		return &splitCheck{w: c.rk.w, since: c.written, what: "the live claim"}
	}
	return nil
}

// bindingHolds reports whether a binding seen must still hold: its worker
// up as the same instance and never down since, and its idle TTL not run
// out.
func (s *sim) bindingHolds(b bindSeen) bool {
	return b.w.state == stUp && b.w.gen == b.gen && b.w.downAt < b.at && s.now-b.at < s.idleTTL()
}

// offeredOverloaded reports whether the request being routed was offered
// a rank of w marked Overloaded.
func (s *sim) offeredOverloaded(w *worker) bool {
	for _, c := range s.acands {
		if c.Overloaded && c.Target.Worker == w.id {
			return true
		}
	}
	return false
}

// jobStarted and jobEnded keep the count of each key's accepted requests
// queued or running (a lost job, whose answer nobody gets, is not one).
func (s *sim) jobStarted(j *job) {
	if s.inv.active == nil || j.lost {
		return
	}
	k := s.kid[j.req]
	if s.inv.active[k] > 0 {
		s.inv.concurrent++
	}
	s.inv.active[k]++
	if j.split != nil {
		s.checkArrival(j)
	}
}

func (s *sim) jobEnded(j *job) {
	if s.inv.active != nil && !j.lost {
		s.inv.active[s.kid[j.req]]--
	}
}

// checkArrival is invariant 3's second half: job j, which went elsewhere
// than its key's binding expected, reaches its worker; a violation if the
// binding's worker is running an accepted request of the same key.
func (s *sim) checkArrival(j *job) {
	sc := j.split
	k := s.kid[j.req]
	if s.inv.active[k] < 2 {
		return // j alone
	}
	for _, rk := range sc.w.ranks {
		for _, o := range rk.active {
			if o != j && !o.lost && s.kid[o.req] == k {
				violate(&s.res, "%s: %s started on %s at %s while %s ran on %s, where %s has been since %s",
					InvTwoWorkers, s.describe(j.req), j.rank.w.instanceName(), secsAt(s.now), s.describe(o.req), sc.w.instanceName(), sc.what, secsAt(sc.since))
				return
			}
		}
	}
}

// checkEnd is invariant 1, when every request has been served: every turn
// started was ended, and each replica's layer, once its clock has passed
// every deadline a binding without a lease, a reservation, a dispatch or
// a quarantine can have (IdleTTL, ReserveTimeout, DispatchTimeout,
// QuarantineTTL), holds no entry: only a lease never released keeps a
// binding. It advances the layers' clocks, so it runs after finish has
// read their Stats.
func (s *sim) checkEnd(res *Result) {
	if s.inv.open == nil {
		return
	}
	res.InvariantChecks++
	var open [][2]int32
	for _, v := range s.inv.open {
		open = append(open, v)
	}
	slices.SortFunc(open, func(a, b [2]int32) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	for _, v := range open {
		violate(res, "%s: %s's turn%s was never ended (no Done) when the run ended at %s", InvLeaseLeaked, s.describe(int(v[0])), s.replicaName(int(v[1])), secsAt(s.now))
	}
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	steps := []time.Duration{
		placement.DefaultReserveTimeout + placement.DefaultDispatchTimeout + time.Second,
		or(s.cfg.QuarantineTTL, placement.DefaultQuarantineTTL) + time.Second,
		or(s.cfg.IdleTTL, placement.DefaultIdleTTL) + time.Second,
	}
	for k, rep := range s.reps {
		res.InvariantChecks++
		for _, d := range steps {
			if err := rep.clk.AdvanceBy(d); err != nil {
				violate(res, "%s: replica %d's layer clock could not advance: %v", InvLeaseLeaked, k, err)
				break
			}
		}
		st := rep.layer.Stats()
		if st.Live == 0 {
			continue
		}
		var bound []string
		for _, wi := range st.Workers {
			if wi.Bound > 0 {
				bound = append(bound, fmt.Sprintf("%s: %d", wi.ID, wi.Bound))
			}
		}
		violate(res, "%s: the layer%s still holds live entries: %d (%d quarantined; bound sessions by worker: %s) at %s, %s after the last answer at %s",
			InvLeaseLeaked, s.replicaName(k), st.Live, st.Quarantined, strings.Join(bound, ", "), secsAt(rep.clk.Now()), rep.clk.Now()-s.now, secsAt(s.now))
	}
}

// Violations returns every result's invariant violations, each prefixed
// with its policy's name; when a result counted more than it kept, a last
// line says how many more. None: every check passed.
func (r *Report) Violations() []string {
	var out []string
	for i := range r.Results {
		out = appendViolations(out, r.Results[i].Policy.String(), &r.Results[i])
	}
	return out
}

// Violations returns every result's invariant violations, each prefixed
// with its consistency policy and replica count ("claims R=3: ..."); when
// a result counted more than it kept, a last line says how many more.
// None: every check passed.
func (r *ReplicaReport) Violations() []string {
	var out []string
	for i := range r.Results {
		rr := &r.Results[i]
		out = appendViolations(out, fmt.Sprintf("%s R=%d", rr.Consistency, rr.Replicas), &rr.Result)
	}
	return out
}

func appendViolations(out []string, name string, res *Result) []string {
	for _, v := range res.Violations {
		out = append(out, name+": "+v)
	}
	if more := res.ViolationCount - len(res.Violations); more > 0 {
		out = append(out, fmt.Sprintf("%s: %d more violations not kept", name, more))
	}
	return out
}

// breakRoute is testBreak's "departed" and "split": it sends request i
// elsewhere than the layer dispatched it.
func (s *sim) breakRoute(i int, rk *rank) *rank {
	switch testBreak {
	case "departed":
		for _, w := range s.workers {
			if w.state != stUp && s.breakOnce("departed", true) {
				return w.ranks[0]
			}
		}
	case "split":
		if s.inv.broke >= 3 || !s.runsKey(rk.w, s.kid[i]) {
			return rk
		}
		for _, w := range s.upW {
			if w != rk.w {
				s.inv.broke++
				return w.ranks[0]
			}
		}
	}
	return rk
}

// runsKey reports whether w runs an accepted request of key k.
func (s *sim) runsKey(w *worker, k int32) bool {
	for _, rk := range w.ranks {
		for _, o := range rk.active {
			if !o.lost && s.kid[o.req] == k {
				return true
			}
		}
	}
	return false
}
