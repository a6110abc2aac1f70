package affinityprom_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/affinityprom"
	"github.com/placementlab/placement/impl/placement"
)

var ns = affinity.Namespace{Model: "m", Tenant: "t"}

func key(t *testing.T, id string) affinity.Key {
	t.Helper()
	k, err := ns.Session(id)
	require.NoError(t, err)
	return k
}

var all = []affinity.Candidate{{Target: affinity.WorkerOnly("a")}, {Target: affinity.WorkerOnly("b")}}

// turn runs one request of session id (the zero Key for "") through Start,
// Eligible, Dispatch and Complete: dispatched to each worker of tries in
// turn, with its outcome, until one is not refused. It returns the last
// Complete's error.
func turn(t *testing.T, l *affinity.Layer, id string, tries ...dispatch) error {
	t.Helper()
	req := affinity.Request{}
	if id != "" {
		req.Session = key(t, id)
	}
	tn, err := l.Start(context.Background(), req)
	require.NoError(t, err)
	defer tn.Done()
	for _, d := range tries {
		cands, err := tn.Eligible(all, nil)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(cands, func(c affinity.Candidate) bool { return c.Target.Worker == d.worker }),
			"%s is not among %v", d.worker, cands)
		a, err := tn.Dispatch(affinity.WorkerOnly(d.worker))
		require.NoError(t, err)
		err = a.Complete(d.out)
		if !errors.Is(err, placement.ErrNotAccepted) {
			return err
		}
	}
	return placement.ErrNotAccepted
}

type dispatch struct {
	worker string
	out    placement.Outcome
}

func accept(w string) dispatch    { return dispatch{w, placement.Accepted} }
func refuse(w string) dispatch    { return dispatch{w, placement.DefinitelyNotAccepted} }
func ambiguous(w string) dispatch { return dispatch{w, placement.Ambiguous} }

// drive runs a scenario on a real layer that moves most of its counters.
func drive(t *testing.T) *affinity.Layer {
	t.Helper()
	l, err := affinity.New(affinity.Config{Clock: placement.NewManualClock(0)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	for _, w := range []string{"a", "b"} {
		_, err := l.Join(affinity.Worker{ID: w, Identity: "boot-1"})
		require.NoError(t, err)
	}

	require.NoError(t, turn(t, l, "s1", accept("a")))                            // first turn: binds s1 to a
	require.NoError(t, turn(t, l, "s1", accept("a")))                            // a hit
	require.NoError(t, turn(t, l, "s1", refuse("a"), accept("b")))               // a refused hit (a hit, a move): binds s1 to b
	require.NoError(t, turn(t, l, "s5", accept("b")))                            // binds s5 to b
	require.ErrorIs(t, turn(t, l, "s2", ambiguous("a")), placement.ErrAmbiguous) // quarantined
	require.ErrorIs(t, turn(t, l, "s3", ambiguous("b")), placement.ErrAmbiguous) // quarantined
	require.NoError(t, turn(t, l, "s2", accept("a")))                            // quarantined: routed unpinned, to its attempt's worker
	require.NoError(t, turn(t, l, "", accept("a")))                              // no session: routed unpinned
	require.ErrorIs(t, turn(t, l, "s4", refuse("a")), placement.ErrNotAccepted)  // refused first turn, never bound

	qs := l.Quarantined()
	require.Len(t, qs, 2)
	for _, q := range qs {
		res := placement.ResolveNotAccepted
		if q.Key == key(t, "s2") {
			res = placement.ResolveAccepted // s2 binds to a
		}
		require.NoError(t, l.Resolve(q, res))
	}

	require.NoError(t, l.Fail("b"))
	// A pin to the failed worker: a typed error (counted in errors).
	_, err = l.Start(context.Background(), affinity.Request{Session: key(t, "s6"), Pin: affinity.WorkerOnly("b"), HasPin: true})
	require.ErrorIs(t, err, affinity.ErrPinnedWorkerGone)
	require.NoError(t, turn(t, l, "s1", accept("a")))                            // b failed: s1 moves to a
	require.ErrorIs(t, turn(t, l, "s7", ambiguous("a")), placement.ErrAmbiguous) // left quarantined
	return l
}

// scrape fetches the registry's exposition over HTTP, as Prometheus does,
// and parses it.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return mfs
}

// flat lists every series of mfs as `name{label="value",...}` (labels
// sorted, the constant label router left out: checked to be "r1") with its
// value, and every family's type.
func flat(t *testing.T, mfs map[string]*dto.MetricFamily) (map[string]float64, map[string]dto.MetricType) {
	t.Helper()
	series, types := map[string]float64{}, map[string]dto.MetricType{}
	for name, mf := range mfs {
		types[name] = mf.GetType()
		for _, m := range mf.GetMetric() {
			var labels []string
			router := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "router" {
					router = lp.GetValue()
					continue
				}
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			assert.Equal(t, "r1", router, "%s %v", name, m.GetLabel())
			sort.Strings(labels)
			k := name
			if len(labels) > 0 {
				k += "{" + strings.Join(labels, ",") + "}"
			}
			v := m.GetCounter().GetValue()
			if mf.GetType() == dto.MetricType_GAUGE {
				v = m.GetGauge().GetValue()
			}
			_, dup := series[k]
			require.False(t, dup, "series %s twice", k)
			series[k] = v
		}
	}
	return series, types
}

func register(t *testing.T, src affinity.Source) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(affinityprom.NewCollector(src, affinityprom.Options{ConstLabels: prometheus.Labels{"router": "r1"}}))
	return reg
}

// TestScrape drives a real layer and checks every series of the scrape.
func TestScrape(t *testing.T) {
	l := drive(t)
	series, types := flat(t, scrape(t, register(t, l)))

	const p = "placement_affinity_"
	want := map[string]float64{
		p + "hits_total":                                        1, // s1's hit (its refused hit is none)
		p + "binds_total":                                       5, // s1 on a, s1 on b, s5, s2 resolved, s1 back on a
		p + "waits_total":                                       0,
		p + `unpinned_total{cause="off"}`:                       0,
		p + `unpinned_total{cause="no_session"}`:                1,
		p + `unpinned_total{cause="capacity"}`:                  0,
		p + `unpinned_total{cause="closing"}`:                   0,
		p + `unpinned_total{cause="admission"}`:                 0,
		p + `unpinned_total{cause="quarantined"}`:               1,
		p + `unpinned_total{cause="move_lost"}`:                 0,
		p + `unpinned_total{cause="moves_exhausted"}`:           0,
		p + `unpinned_total{cause="leases"}`:                    0,
		p + `unpinned_total{cause="reservation_lost"}`:          0,
		p + `unpinned_total{cause="hit_refused"}`:               0,
		p + `moves_total{cause="worker_gone"}`:                  0,
		p + `moves_total{cause="worker_failed"}`:                1,
		p + `moves_total{cause="rank_gone"}`:                    0,
		p + `moves_total{cause="follow"}`:                       0,
		p + `moves_total{cause="refused"}`:                      1,
		p + "quarantines_opened_total":                          3, // s2, s3, s7
		p + `quarantines_resolved_total{result="accepted"}`:     1,
		p + `quarantines_resolved_total{result="not_accepted"}`: 1,
		p + "quarantines_expired_total":                         0,
		p + "quarantines_dropped_total":                         0,
		p + "binding_expirations_total":                         0,
		p + "stale_at_birth_total":                              0,
		p + "errors_total":                                      1, // the pin to the failed worker
		p + "live_entries":                                      4, // s1, s2, s5 bound; s7 quarantined
		p + "quarantined_sessions":                              1, // s7
		p + `table_entries{phase="decode"}`:                     4,
		p + `table_entries{phase="prefill"}`:                    0,
		p + `table_quarantined_sessions{phase="decode"}`:        1,
		p + `table_quarantined_sessions{phase="prefill"}`:       0,
		p + `table_capacity{phase="decode"}`:                    65536,
		p + `table_capacity{phase="prefill"}`:                   65536,
		p + `table_admission_mark{phase="decode"}`:              32768,
		p + `table_admission_mark{phase="prefill"}`:             32768,
		p + `worker_up{worker="a"}`:                             1,
		p + `worker_up{worker="b"}`:                             0,
		p + `worker_bound_sessions{worker="a"}`:                 2, // s1, s2
		p + `worker_bound_sessions{worker="b"}`:                 1, // s5 (b failed: nothing fenced)
	}
	assert.Equal(t, want, series)

	for name, typ := range types {
		want := dto.MetricType_COUNTER
		if !strings.HasSuffix(name, "_total") {
			want = dto.MetricType_GAUGE
		}
		assert.Equal(t, want, typ, name)
	}
}

// TestLint runs the client library's metric linter on the collector.
func TestLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(affinityprom.NewCollector(drive(t), affinityprom.Options{}))
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// metricOf maps every field of affinity.Stats to its series: an element
// of an array field (index i) to label(i), "" for one with no series.
var metricOf = map[string]struct {
	name  string
	label func(i int) string
}{
	"Hits":                {name: "hits_total"},
	"Binds":               {name: "binds_total"},
	"Waits":               {name: "waits_total"},
	"Unpinned":            {name: "unpinned_total", label: causeLabel},
	"Moves":               {name: "moves_total", label: func(i int) string { return `cause="` + affinity.MoveCause(i).String() + `"` }},
	"QuarantinesOpened":   {name: "quarantines_opened_total"},
	"ResolvedAccepted":    {name: `quarantines_resolved_total{result="accepted"}`},
	"ResolvedNotAccepted": {name: `quarantines_resolved_total{result="not_accepted"}`},
	"QuarantinesExpired":  {name: "quarantines_expired_total"},
	"QuarantinesDropped":  {name: "quarantines_dropped_total"},
	"Expirations":         {name: "binding_expirations_total"},
	"StaleAtBirth":        {name: "stale_at_birth_total"},
	"Errors":              {name: "errors_total"},
	"Live":                {name: "live_entries"},
	"Quarantined":         {name: "quarantined_sessions"},
	"Workers":             {}, // worker_up and worker_bound_sessions, per worker
	"Tables":              {}, // table_entries, _quarantined_sessions, _capacity, _admission_mark, per phase
}

func causeLabel(i int) string {
	if affinity.Cause(i) == affinity.CauseNone {
		return ""
	}
	return `cause="` + affinity.Cause(i).String() + `"`
}

// TestEveryStat checks that every field of affinity.Stats has its series,
// equal to the field, and that the scrape has no other series: a field
// added to Stats without a metric fails here. It runs on the driven layer
// and on Stats whose every count differs (so a swap of two fields fails).
func TestEveryStat(t *testing.T) {
	t.Run("layer", func(t *testing.T) { everyStat(t, drive(t)) })
	t.Run("distinct", func(t *testing.T) {
		var s affinity.Stats
		n := 0
		next := func() int { n++; return n }
		v := reflect.ValueOf(&s).Elem()
		for i := range v.NumField() {
			switch f := v.Field(i); f.Kind() {
			case reflect.Uint64:
				f.SetUint(uint64(next()))
			case reflect.Int:
				f.SetInt(int64(next()))
			case reflect.Array:
				if v.Type().Field(i).Name == "Tables" {
					for j := range s.Tables {
						s.Tables[j] = affinity.TableStats{Live: next(), Quarantined: next(), Capacity: next(), AdmitMark: next()}
					}
					continue
				}
				for j := range f.Len() {
					if metricOf[v.Type().Field(i).Name].label(j) != "" {
						f.Index(j).SetUint(uint64(next()))
					}
				}
			}
		}
		s.Workers = []affinity.WorkerInfo{
			{Worker: affinity.Worker{ID: "x"}, State: affinity.WorkerUp, Bound: next()},
			{Worker: affinity.Worker{ID: "y"}, State: affinity.WorkerFailed, Bound: next()},
		}
		everyStat(t, &source{s: s})
	})
}

func everyStat(t *testing.T, src affinity.Source) {
	series, _ := flat(t, scrape(t, register(t, src)))
	s := src.Stats()
	const p = "placement_affinity_"
	seen := map[string]bool{}
	check := func(k string, want float64) {
		t.Helper()
		got, ok := series[k]
		if assert.True(t, ok, "no series %s", k) {
			assert.Equal(t, want, got, k)
		}
		seen[k] = true
	}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		m, ok := metricOf[f.Name]
		if !assert.True(t, ok, "Stats.%s has no metric in metricOf", f.Name) {
			continue
		}
		switch fv.Kind() {
		case reflect.Uint64:
			check(p+m.name, float64(fv.Uint()))
		case reflect.Int:
			check(p+m.name, float64(fv.Int()))
		case reflect.Array:
			if f.Name == "Tables" {
				for j, tb := range s.Tables {
					lb := `{phase="` + affinity.Phase(j).String() + `"}`
					check(p+"table_entries"+lb, float64(tb.Live))
					check(p+"table_quarantined_sessions"+lb, float64(tb.Quarantined))
					check(p+"table_capacity"+lb, float64(tb.Capacity))
					check(p+"table_admission_mark"+lb, float64(tb.AdmitMark))
				}
				continue
			}
			for j := range fv.Len() {
				if lb := m.label(j); lb != "" {
					check(p+m.name+"{"+lb+"}", float64(fv.Index(j).Uint()))
				} else {
					assert.Zero(t, fv.Index(j).Uint(), "Stats.%s[%d] has no series but counts", f.Name, j)
				}
			}
		case reflect.Slice:
			require.Equal(t, "Workers", f.Name)
			require.NotEmpty(t, s.Workers)
			for _, w := range s.Workers {
				up := 0.0
				if w.State == affinity.WorkerUp {
					up = 1
				}
				check(p+`worker_up{worker="`+w.ID+`"}`, up)
				check(p+`worker_bound_sessions{worker="`+w.ID+`"}`, float64(w.Bound))
			}
		default:
			t.Errorf("Stats.%s: kind %s not handled", f.Name, fv.Kind())
		}
	}
	assert.Len(t, metricOf, v.NumField(), "metricOf names a field Stats does not have")
	for k := range series {
		assert.True(t, seen[k], "series %s stands for no Stats field", k)
	}
}

// source is a fixed affinity.Source.
type source struct {
	s     affinity.Stats
	calls int
}

func (s *source) Stats() affinity.Stats { s.calls++; return s.s }

// TestOnceAndOptions checks that a scrape reads Stats once, the namespace
// option, and a constant label that clashes with a variable one.
func TestOnceAndOptions(t *testing.T) {
	src := &source{s: affinity.Stats{Hits: 7, Workers: []affinity.WorkerInfo{{Worker: affinity.Worker{ID: "w"}, State: affinity.WorkerUp}}}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(affinityprom.NewCollector(src, affinityprom.Options{Namespace: "router"}))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	assert.Equal(t, 1, src.calls)
	assert.Len(t, mfs, 20)
	for _, mf := range mfs {
		assert.True(t, strings.HasPrefix(mf.GetName(), "router_affinity_"), mf.GetName())
	}
	i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "router_affinity_hits_total" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, 7.0, mfs[i].GetMetric()[0].GetCounter().GetValue())

	clash := affinityprom.NewCollector(src, affinityprom.Options{ConstLabels: prometheus.Labels{"worker": "x"}})
	assert.Error(t, prometheus.NewRegistry().Register(clash))
}

// TestInvalidWorkerID: a worker id that is not valid UTF-8 (Join refuses
// it) fails the scrape with an error instead of a panic; the other series
// are still served with ContinueOnError.
func TestInvalidWorkerID(t *testing.T) {
	src := &source{s: affinity.Stats{Workers: []affinity.WorkerInfo{{Worker: affinity.Worker{ID: "bad\xff"}, State: affinity.WorkerUp}}}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(affinityprom.NewCollector(src, affinityprom.Options{}))
	mfs, err := reg.Gather()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "UTF-8")
	assert.Len(t, mfs, 18) // everything but the two worker families
}
