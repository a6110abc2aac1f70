package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fast is the smoke test's configuration: a 2 s run on short timers.
func fast() options {
	o := defaults()
	o.duration, o.live, o.clients = 2*time.Second, 500*time.Millisecond, 8
	o.dispatchTimeout, o.every = 100*time.Millisecond, 50*time.Millisecond
	return o
}

// TestDemoSmoke runs the demo for 2 s: it succeeds, prints live lines and
// a summary that shows hits, settled quarantines, the restart and the
// placement handling's line count; afterwards no goroutine is left.
func TestDemoSmoke(t *testing.T) {
	before := runtime.NumGoroutine()
	var out bytes.Buffer
	err := runDemo(context.Background(), fast(), &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	s := out.String()
	// A live line's format (on a loaded machine the ticker may be late and
	// no later turn served yet: "[  0.6s]", "hit rate -").
	assert.Regexp(t, `\[ +\d+\.\ds\] requests \d+ ok \d+ \| hit rate ([\d.]+%|-) \| quarantines open \d+ settled \d+ \| unpinned \d+`, s)
	assert.Contains(t, s, "result        ok")
	assert.Regexp(t, `hit rate      [\d.]+% of later turns served \([1-9]\d* hits`, s)
	assert.Regexp(t, `quarantines   opened [1-9]\d*, settled \d+ \(resolver: accepted [1-9]\d*, .*, open 0`, s)
	assert.Contains(t, s, "phoenix(phoenix-boot-2, up")
	assert.Regexp(t, `in flight 0`, s)
	m := regexp.MustCompile(`placement handling: (\d+) lines`).FindStringSubmatch(s)
	require.Len(t, m, 2)
	want, err := placementLines(mainSource)
	require.NoError(t, err)
	assert.Equal(t, want, atoi(t, m[1]))

	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func atoi(t *testing.T, s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// The summary of a router that served nothing says what is wrong, and
// runDemo's caller exits non-zero on it.
func TestSummaryReportsWrong(t *testing.T) {
	k, err := newKit(nil, nil, fast())
	require.NoError(t, err)
	defer k.Close()
	var out bytes.Buffer
	err = summary(&out, time.Second, k, &loadStats{}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no hits")
	assert.Contains(t, out.String(), "result        WRONG: no hits")
}

// -workers is read as id=url pairs (a bare URL is its own id); bad values
// are errors.
func TestParseWorkers(t *testing.T) {
	ws, err := parseWorkers("a=http://10.0.0.1:8000, http://10.0.0.2:8000")
	require.NoError(t, err)
	require.Len(t, ws, 2)
	assert.Equal(t, "a", ws[0].ID)
	assert.Equal(t, "http://10.0.0.2:8000", ws[1].ID)
	assert.Equal(t, "10.0.0.1:8000", ws[0].URL.Host)
	for _, bad := range []string{"", "a=notaurl", "a=http://"} {
		_, err := parseWorkers(bad)
		assert.Error(t, err, bad)
	}
	assert.True(t, strings.HasPrefix(ws[1].URL.String(), "http://"))
}

// Without -demo: the router serves the -workers it is given, once their
// health checks pass, until its context ends; bad -workers are an error.
func TestServeWorkers(t *testing.T) {
	o := fast()
	w, err := startWorker("w", 2, steady, 1, o)
	require.NoError(t, err)
	defer w.close()
	o.listen, o.workers = "127.0.0.1:0", "w="+w.url()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, pw); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr := strings.Fields(strings.TrimPrefix(line, "router: listening on "))[0]
	addr = strings.TrimSuffix(addr, ",")
	var resp *http.Response
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/completions", strings.NewReader("{}"))
		req.Header.Set("X-Session-ID", "s")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK // 503 until the health check joins w
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "w", resp.Header.Get("X-Served-By"))
	resp, err = http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(metrics), `placement_affinity_worker_up{worker="w"} 1`)
	assert.Contains(t, string(metrics), "placement_router_stream_cuts_total 0")
	assert.Contains(t, string(metrics), "placement_router_ejections_total 0")
	cancel()
	assert.NoError(t, <-done)
	http.DefaultClient.CloseIdleConnections()

	o.workers = ""
	assert.Error(t, serve(context.Background(), o, io.Discard))
}

// TestReplicasDemoSmoke runs -demo -replicas 3 for 3 s on an embedded
// three-member etcd: it succeeds, stops a member and a replica halfway,
// and its summary line says no session ran on two workers at once past
// the window, no quarantine is left open, and most later turns stayed on
// their session's worker; afterwards no goroutine is left.
func TestReplicasDemoSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd")
	}
	before := runtime.NumGoroutine()
	o := fast()
	o.duration, o.replicas = 3*time.Second, 3
	var out bytes.Buffer
	err := runReplicasDemo(context.Background(), o, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	s := out.String()
	assert.Regexp(t, `etcd member 2 and router replica r3 stopped`, s)
	assert.Regexp(t, `summary after [\d.]+s: turns served [1-9]\d* \| later turns on the session's bound worker [\d.]+% \(\d+/\d+\) \| sessions on two workers at once past 1s: 0 \| store ops per turn [\d.]+ \| quarantines open 0`, s)
	assert.Contains(t, s, "result        ok")
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The split judge: two turns of a session at once on two workers are a
// split unless a placement of the session came within the window before
// the later one; later turns on the previous turn's worker are sticky.
func TestServedLogJudge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var l servedLog
	// s1: placed on a, later on b while a turn runs on a, 2 s after the
	// placement: a split past the window.
	l.add(served{session: "s1", worker: "a", start: at(0), end: at(10), placing: true})
	l.add(served{session: "s1", worker: "a", start: at(2000), end: at(2100)})
	l.add(served{session: "s1", worker: "b", start: at(2050), end: at(2060)})
	// s2: moved to b (a placing dispatch) while a turn runs on a: within
	// the window.
	l.add(served{session: "s2", worker: "a", start: at(0), end: at(10), placing: true})
	l.add(served{session: "s2", worker: "a", start: at(3000), end: at(3100)})
	l.add(served{session: "s2", worker: "b", start: at(3050), end: at(3060), placing: true})
	// s3: one worker throughout.
	l.add(served{session: "s3", worker: "c", start: at(0), end: at(10), placing: true})
	l.add(served{session: "s3", worker: "c", start: at(20), end: at(30)})
	sticky, later, splits := l.judge()
	assert.Equal(t, 5, later)
	assert.Equal(t, 3, sticky)
	require.Len(t, splits, 1)
	assert.Contains(t, splits[0], "s1 on a and b")
}

// -store is local, embedded, etcd=endpoints or dir=path.
func TestParseStore(t *testing.T) {
	for in, kind := range map[string]string{"": "local", "local": "local", "embedded": "embedded",
		"etcd=a:2379,b:2379": "etcd", "dir=/tmp/x": "dir"} {
		s, err := parseStore(in)
		require.NoError(t, err, in)
		assert.Equal(t, kind, s.kind, in)
	}
	s, _ := parseStore("etcd=a:2379, b:2379")
	assert.Equal(t, []string{"a:2379", "b:2379"}, s.endpoints)
	for _, bad := range []string{"etcd=", "dir=", "zookeeper"} {
		_, err := parseStore(bad)
		assert.Error(t, err, bad)
	}
}
