// Package campaign is the nightly campaign's engine: it rotates through
// every checker of the repository within a time budget, several units at
// once (errgroup), keeps its state in a file it can resume from, and
// writes a report a person can act on (summary.json, summary.md and
// index.html, with each failure's seed, Porcupine visualization, log and
// the one command that reproduces it). cmd/campaign is its command line
// (make campaign).
//
// A checker is run in units: a bounded piece of work drawn from the
// campaign's seed (a few Porcupine seeds at one size, GOMAXPROCS, with or
// without -race and a CPU-bound neighbour; one fuzz target for a count of
// inputs; rapid at a high check count; one exploration at larger
// constants; ...). Unit n of checker c is the same for the same campaign
// seed, so a campaign's units can be run again one by one.
package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Unit is one bounded piece of a checker's work.
type Unit struct {
	Checker string `json:"checker"`
	// N numbers the checker's units from 0 in the campaign.
	N    int    `json:"n"`
	Seed uint64 `json:"seed"`
	// Race builds the checker with the race detector; Procs is its
	// GOMAXPROCS (0: the machine's); Load runs a CPU-bound neighbour
	// beside it.
	Race  bool `json:"race,omitempty"`
	Procs int  `json:"procs,omitempty"`
	Load  bool `json:"load,omitempty"`
	// Size is the checker's own measure: operations per client, rapid
	// checks, fuzz inputs; Count how many seeds (or runs) the unit makes.
	Size  int `json:"size,omitempty"`
	Count int `json:"count,omitempty"`
	// Arg names what the unit runs within its checker: a fuzz target, a
	// config, a test pattern.
	Arg string `json:"arg,omitempty"`
}

// String is the unit as the progress line and the report show it.
func (u Unit) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s#%d seed %d", u.Checker, u.N, u.Seed)
	if u.Arg != "" {
		fmt.Fprintf(&b, " %s", u.Arg)
	}
	if u.Race {
		b.WriteString(" race")
	}
	if u.Procs > 0 {
		fmt.Fprintf(&b, " P%d", u.Procs)
	}
	if u.Load {
		b.WriteString(" loaded")
	}
	return b.String()
}

// Statuses of a unit's Result and of a checker's row.
const (
	Pass  = "pass"
	Fail  = "fail"
	Error = "error" // the checker could not run
	Skip  = "skip"  // the checker cannot run here, and says why (TLC without a jar)
)

// Failure is one failure a unit found.
type Failure struct {
	// ID names the failure's directory under the report's failures/.
	ID      string `json:"id"`
	Checker string `json:"checker"`
	Unit    Unit   `json:"unit"`
	Seed    uint64 `json:"seed"`
	// What is the failure in one line; Result the checker's verdict
	// (Illegal, Unknown, a test's FAIL, a crasher).
	What   string `json:"what"`
	Result string `json:"result,omitempty"`
	// Paths relative to the report directory: the saved history, its
	// trimmed form, Porcupine's visualization, the unit's log.
	History string `json:"history,omitempty"`
	Trimmed string `json:"trimmed,omitempty"`
	HTML    string `json:"html,omitempty"`
	Log     string `json:"log,omitempty"`
	// Repro is the one command that reproduces the failure, from the
	// module's root; Promote the one that keeps it as regression data.
	Repro   string `json:"repro"`
	Promote string `json:"promote,omitempty"`
}

// Result is what a unit did.
type Result struct {
	Unit   Unit   `json:"unit"`
	Status string `json:"status"`
	// Runs counts the unit's runs (seeds, rapid checks, fuzz targets);
	// Checked what they checked (operations, states, inputs).
	Runs     int            `json:"runs"`
	Checked  int64          `json:"checked"`
	Coverage map[string]int `json:"coverage,omitempty"`
	Failures []Failure      `json:"failures,omitempty"`
	// Detail says in one line what the unit found (or why it could not
	// run, or why it was skipped).
	Detail string        `json:"detail,omitempty"`
	Log    string        `json:"log,omitempty"`
	Took   time.Duration `json:"took"`
	// Zoo is the bug zoo's variants (its unit only).
	Zoo []ZooRow `json:"zoo,omitempty"`
}

// Checker is one kind of check the campaign rotates through.
type Checker struct {
	Name string
	// Kind groups checkers in the report: porcupine, rapid, fuzz, explore,
	// tlc, replay, zoo, go-test.
	Kind string
	// Doc says in one line what the checker checks.
	Doc string
	// Once: one unit per campaign (the bug zoo).
	Once bool
	// Weight is the checker's share of the budget relative to the others
	// (0: 1).
	Weight float64
	// Plan fills a unit's parameters from r (Checker, N and Seed are set).
	Plan func(r *rand.Rand, u *Unit)
	// Run runs a unit. It must end by ctx's deadline, and report a failure
	// it finds in its Result (an error return means the unit could not run).
	Run func(ctx context.Context, e *Env, u Unit) Result
	// Limit bounds one unit; a unit still running then is killed and
	// counts as an error (0: 10 minutes).
	Limit time.Duration
}

// Env is where a campaign runs: the module's root, the report directory,
// the worker binaries (built with and without -race) and the go command.
type Env struct {
	Root, Out string
	Bin, Race string
	Go        string
	// Java and Jar run TLC; empty Jar: TLC is skipped.
	Jar string
}

// Rel returns path relative to the report directory (as the report links
// it), or path when it is not below it.
func (e *Env) Rel(path string) string {
	if r, err := filepath.Rel(e.Out, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// Stats is one checker's row: what its units did, added up.
type Stats struct {
	Name     string         `json:"name"`
	Kind     string         `json:"kind"`
	Doc      string         `json:"doc"`
	Units    int            `json:"units"`
	Runs     int            `json:"runs"`
	Checked  int64          `json:"checked"`
	Coverage map[string]int `json:"coverage,omitempty"`
	Failures []Failure      `json:"failures,omitempty"`
	Errors   int            `json:"errors"`
	Skipped  int            `json:"skipped"`
	// Last is the last unit's detail; Errs the details of the units that
	// could not run.
	Last string        `json:"last,omitempty"`
	Errs []string      `json:"errs,omitempty"`
	Took time.Duration `json:"took"`
	// Zoo is the bug zoo's variants, for its checker.
	Zoo []ZooRow `json:"zoo,omitempty"`
}

// Status is the row's verdict: fail on any failure, error when a unit
// could not run, skip when every unit was skipped, pass otherwise (and
// "not run" when the budget reached none of its units).
func (s *Stats) Status() string {
	switch {
	case len(s.Failures) > 0:
		return Fail
	case s.Errors > 0:
		return Error
	case s.Units == 0:
		return "not run"
	case s.Skipped == s.Units:
		return Skip
	}
	return Pass
}

// ZooRow is one variant of the bug zoo: who caught it, and how fast.
type ZooRow struct {
	Variant string `json:"variant"`
	Caught  bool   `json:"caught"`
	By      string `json:"by"`
	Time    string `json:"time"`
	First   string `json:"first,omitempty"`
}

// State is a campaign's state file (state.json in the report directory):
// enough to continue a campaign that was stopped.
type State struct {
	Seed    uint64        `json:"seed"`
	Budget  time.Duration `json:"budget"`
	Elapsed time.Duration `json:"elapsed"`
	Started time.Time     `json:"started"`
	// Finished: the budget was spent (a stopped campaign is not).
	Finished bool `json:"finished"`
	// Next is each checker's next unit number; Redo the units a stop cut
	// short, run first when the campaign continues.
	Next  map[string]int `json:"next"`
	Redo  []Unit         `json:"redo,omitempty"`
	Stats []*Stats       `json:"stats"`
	// Parallel is how many units ran at once.
	Parallel int    `json:"parallel"`
	Machine  string `json:"machine,omitempty"`
}

// Config is a campaign's settings.
type Config struct {
	Budget time.Duration
	Seed   uint64
	// Parallel units at once (0: 2).
	Parallel int
	// Only runs the checkers whose name contains one of these (empty:
	// all).
	Only []string
	// Progress receives the live progress line (nil: none); TTY rewrites
	// it in place.
	Progress io.Writer
	TTY      bool
	// Every is the progress line's period (0: 5 s on a TTY, 30 s
	// otherwise).
	Every time.Duration
	// Machine describes the machine in the report.
	Machine string
}

// ErrStopped says the campaign was stopped before its budget was spent;
// its state file continues it (Resume).
var ErrStopped = errors.New("campaign: stopped before the budget was spent")

// Campaign is a running campaign.
type Campaign struct {
	cfg      Config
	env      *Env
	checkers []Checker
	st       *State

	mu      sync.Mutex
	running map[string]Unit
	began   time.Time
	prior   time.Duration
}

// New starts a campaign's state for checkers, or continues the one in
// env.Out's state.json when resume is set and the file exists (its seed
// and budget win over cfg's).
func New(cfg Config, env *Env, checkers []Checker, resume bool) (*Campaign, error) {
	if cfg.Parallel <= 0 {
		cfg.Parallel = 2
	}
	if len(cfg.Only) > 0 {
		var kept []Checker
		for _, c := range checkers {
			for _, o := range cfg.Only {
				if strings.Contains(c.Name, o) {
					kept = append(kept, c)
					break
				}
			}
		}
		checkers = kept
	}
	if len(checkers) == 0 {
		return nil, fmt.Errorf("campaign: no checker selected")
	}
	c := &Campaign{cfg: cfg, env: env, checkers: checkers, running: map[string]Unit{}}
	if resume {
		st, err := ReadState(filepath.Join(env.Out, "state.json"))
		if err == nil {
			c.st = st
			c.cfg.Budget, c.cfg.Seed = st.Budget, st.Seed
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	if c.st == nil {
		c.st = &State{Seed: cfg.Seed, Budget: cfg.Budget, Started: time.Now().UTC(), Next: map[string]int{}}
	}
	c.st.Parallel, c.st.Machine = cfg.Parallel, cfg.Machine
	for _, k := range checkers {
		if c.stats(k.Name) == nil {
			c.st.Stats = append(c.st.Stats, &Stats{Name: k.Name, Kind: k.Kind, Doc: k.Doc})
		}
	}
	return c, nil
}

// State returns the campaign's state (read it after Run returns).
func (c *Campaign) State() *State { return c.st }

func (c *Campaign) stats(name string) *Stats {
	for _, s := range c.st.Stats {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// ReadState reads a state file.
func ReadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("campaign: %s: %w", path, err)
	}
	if st.Next == nil {
		st.Next = map[string]int{}
	}
	return &st, nil
}

// save writes the state file atomically (c.mu held).
func (c *Campaign) save() error {
	c.st.Elapsed = c.prior + time.Since(c.began)
	b, err := json.MarshalIndent(c.st, "", " ")
	if err != nil {
		return err
	}
	path := filepath.Join(c.env.Out, "state.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// UnitFor draws checker k's unit n of the campaign of seed: the same
// unit for the same three.
func UnitFor(k Checker, seed uint64, n int) Unit {
	h := fnv.New64a()
	_, _ = h.Write([]byte(k.Name))
	r := rand.New(rand.NewPCG(seed^h.Sum64(), uint64(n)))
	u := Unit{Checker: k.Name, N: n, Seed: r.Uint64() % 1_000_000_000}
	if k.Plan != nil {
		k.Plan(r, &u)
	}
	return u
}

// elapsed is the campaign's time so far, before this run included.
func (c *Campaign) elapsed() time.Duration { return c.prior + time.Since(c.began) }

// next picks the next unit: a cut-short unit first, then the checker
// furthest behind its share of the time spent (a Once checker before
// any other, once). It returns false when nothing is left to run.
func (c *Campaign) next() (Unit, Checker, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.st.Redo) > 0 {
		u := c.st.Redo[0]
		c.st.Redo = c.st.Redo[1:]
		for _, k := range c.checkers {
			if k.Name == u.Checker {
				return u, k, true
			}
		}
	}
	best, bestScore := -1, 0.0
	for i, k := range c.checkers {
		s := c.stats(k.Name)
		busy := false
		for _, u := range c.running {
			if u.Checker == k.Name {
				busy = true
			}
		}
		if k.Once {
			if c.st.Next[k.Name] == 0 {
				best = i
				break
			}
			continue
		}
		w := k.Weight
		if w <= 0 {
			w = 1
		}
		// Time spent over the weight; a checker with a unit running counts
		// that unit as a minute spent, so the others get their turn.
		score := (s.Took.Seconds() + float64(s.Units)) / w
		if busy {
			score += 60 / w
		}
		if best < 0 || score < bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return Unit{}, Checker{}, false
	}
	k := c.checkers[best]
	n := c.st.Next[k.Name]
	c.st.Next[k.Name] = n + 1
	return UnitFor(k, c.st.Seed, n), k, true
}

// Run runs the campaign until its budget is spent or ctx is done (then it
// returns ErrStopped, with the state saved for Resume). Units still
// running when the budget is spent finish; none starts after.
func (c *Campaign) Run(ctx context.Context) error {
	c.began, c.prior = time.Now(), c.st.Elapsed
	if err := os.MkdirAll(filepath.Join(c.env.Out, "logs"), 0o755); err != nil {
		return err
	}
	stopProgress := c.progress()
	defer stopProgress()
	var g errgroup.Group
	g.SetLimit(c.cfg.Parallel)
	for ctx.Err() == nil && c.elapsed() < c.st.Budget {
		u, k, ok := c.next()
		if !ok {
			break
		}
		key := fmt.Sprintf("%s#%d", u.Checker, u.N)
		g.Go(func() error {
			c.mu.Lock()
			c.running[key] = u
			c.mu.Unlock()
			c.runUnit(ctx, k, u, key)
			return nil
		})
		// Go blocks while Parallel units run; the next pick comes when one
		// ends (a unit's slot), after a short pause that lets that unit's
		// stats land.
		time.Sleep(10 * time.Millisecond)
	}
	_ = g.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil && c.elapsed() < c.st.Budget {
		_ = c.save()
		return ErrStopped
	}
	c.st.Finished = true
	return c.save()
}

func (c *Campaign) runUnit(ctx context.Context, k Checker, u Unit, key string) {
	limit := k.Limit
	if limit <= 0 {
		limit = 10 * time.Minute
	}
	uctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	res := k.Run(uctx, c.env, u)
	res.Unit, res.Took = u, time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.running, key)
	if ctx.Err() != nil {
		// Stopped: the unit is run again when the campaign continues.
		c.st.Redo = append(c.st.Redo, u)
		return
	}
	if uctx.Err() != nil && res.Status != Fail {
		res.Status = Error
		res.Detail = fmt.Sprintf("did not end within %v (%s)", limit, res.Detail)
	}
	s := c.stats(k.Name)
	s.Units++
	s.Runs += res.Runs
	s.Checked += res.Checked
	s.Took += res.Took
	if res.Detail != "" {
		s.Last = res.Detail
	}
	if len(res.Coverage) > 0 {
		if s.Coverage == nil {
			s.Coverage = map[string]int{}
		}
		for n, v := range res.Coverage {
			s.Coverage[n] += v
		}
	}
	switch res.Status {
	case Error:
		s.Errors++
		if len(s.Errs) < 10 {
			s.Errs = append(s.Errs, fmt.Sprintf("%s: %s (log %s)", u, res.Detail, res.Log))
		}
	case Skip:
		s.Skipped++
	}
	s.Failures = append(s.Failures, res.Failures...)
	if len(res.Zoo) > 0 {
		s.Zoo = res.Zoo
	}
	_ = c.save()
}

// Failed reports whether the campaign found a failure or had a checker
// that could not run.
func (st *State) Failed() bool {
	for _, s := range st.Stats {
		if s.Status() == Fail || s.Status() == Error {
			return true
		}
	}
	return false
}

// Totals returns the units, runs, checked and failures over every checker.
func (st *State) Totals() (units, runs int, checked int64, failures int) {
	for _, s := range st.Stats {
		units += s.Units
		runs += s.Runs
		checked += s.Checked
		failures += len(s.Failures)
	}
	return
}

// progress starts the live progress line; the function it returns stops
// it (printing the line a last time).
func (c *Campaign) progress() func() {
	if c.cfg.Progress == nil {
		return func() {}
	}
	every := c.cfg.Every
	if every <= 0 {
		every = 30 * time.Second
		if c.cfg.TTY {
			every = 5 * time.Second
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				c.printProgress(true)
				return
			case <-t.C:
				c.printProgress(false)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// ProgressLine is the live line: elapsed and budget, the units running,
// operations checked and failures.
func (c *Campaign) ProgressLine() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var run []string
	for _, u := range c.running {
		run = append(run, u.String())
	}
	sort.Strings(run)
	units, _, checked, failures := c.st.Totals()
	errs := 0
	for _, s := range c.st.Stats {
		errs += s.Errors
	}
	cur := "none"
	if len(run) > 0 {
		cur = strings.Join(run, ", ")
	}
	return fmt.Sprintf("campaign %s/%s | now: %s | %d units, %d checked | %d failures, %d could not run",
		fmtDur(c.prior+time.Since(c.began)), fmtDur(c.st.Budget), cur, units, checked, failures, errs)
}

func (c *Campaign) printProgress(last bool) {
	line := c.ProgressLine()
	if c.cfg.TTY {
		end := ""
		if last {
			end = "\n"
		}
		fmt.Fprintf(c.cfg.Progress, "\r\033[K%s%s", line, end)
		return
	}
	fmt.Fprintln(c.cfg.Progress, line)
}

func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	}
	return fmt.Sprintf("%dm%02ds", m, s)
}
