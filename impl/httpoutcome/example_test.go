package httpoutcome_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/httpoutcome"
	"github.com/placementlab/placement/impl/placement"
)

// Example_request is a router's request on the affinity layer with Do as
// its forward and Relay as its relay: the first worker refuses (503), the
// request goes to the second, which streams its answer.
func Example_request() {
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer busy.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: hello\n\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer ok.Close()
	names := map[string]string{busy.URL: "busy", ok.URL: "ok"}

	layer, _ := affinity.New(affinity.Config{})
	defer layer.Close()
	all := []affinity.Candidate{}
	for _, url := range []string{busy.URL, ok.URL} {
		_, _ = layer.Join(affinity.Worker{ID: url, Identity: "boot-1"})
		all = append(all, affinity.Candidate{Target: affinity.WorkerOnly(url)})
	}
	tr := &http.Transport{IdleConnTimeout: 4 * time.Second} // below the workers' keep-alive
	defer tr.CloseIdleConnections()
	client := &httpoutcome.Client{Transport: tr}
	body := []byte(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`)

	// The router's handler, for one request.
	w := httptest.NewRecorder()
	h := http.Header{"X-Session-Id": {"conversation-1"}}
	ctx := context.Background()
	req, _ := layer.RequestFromHeader(affinity.Namespace{Model: "m"}, h, affinity.PhaseDecode)
	turn, _ := layer.Start(ctx, req)
	defer turn.Done()
	ended := make(chan httpoutcome.End, 1)
	for {
		cands, err := turn.Eligible(all, nil)
		if err != nil {
			httpoutcome.WriteError(w, err)
			break
		}
		a, _ := turn.Dispatch(cands[0].Target)
		actx, cancel := a.Context(ctx)
		out, _ := http.NewRequest(http.MethodPost, a.Target().Worker+"/v1/chat/completions", strings.NewReader(string(body)))
		resp, o, err := client.Do(actx, out, a.ID(), func(e httpoutcome.End) {
			cancel()
			if e.Kind != httpoutcome.EndNoResponse && e.Status == http.StatusOK {
				ended <- e
			}
		})
		cerr := a.Complete(o)
		fmt.Printf("%s: %v (Complete: %v)\n", names[a.Target().Worker], o, cerr)
		if errors.Is(cerr, placement.ErrNotAccepted) {
			if resp != nil {
				_ = resp.Body.Close()
			}
			all = without(all, a.Target())
			continue
		}
		if resp == nil {
			httpoutcome.WriteError(w, cerr)
			break
		}
		_ = httpoutcome.Relay(w, resp)
		break
	}
	e := <-ended
	fmt.Printf("relayed %d %q\n", w.Code, w.Body.String())
	fmt.Printf("end: %v, %v, %d bytes\n", e.Kind, e.Outcome, e.Bytes)
	// Output:
	// busy: DefinitelyNotAccepted (Complete: placement: the target did not accept the request)
	// ok: Accepted (Complete: <nil>)
	// relayed 200 "data: hello\n\ndata: [DONE]\n\n"
	// end: complete, Accepted, 27 bytes
}

func without(cs []affinity.Candidate, t affinity.Target) []affinity.Candidate {
	var out []affinity.Candidate
	for _, c := range cs {
		if c.Target != t {
			out = append(out, c)
		}
	}
	return out
}

// ExampleTable_With: a deployment whose proxy answers 503 for an upstream
// reset after it forwarded the request makes 503 Ambiguous.
func ExampleTable_With() {
	var t httpoutcome.Table
	fmt.Println(t.Outcome(200), t.Outcome(429), t.Outcome(503), t.Outcome(504))
	t, err := t.With(503, placement.Ambiguous)
	fmt.Println(t.Outcome(503), err)
	_, err = t.With(700, placement.Accepted)
	fmt.Println(errors.Is(err, placement.ErrInvalidArgument))
	// Output:
	// Accepted DefinitelyNotAccepted DefinitelyNotAccepted Ambiguous
	// Ambiguous <nil>
	// true
}

// ExampleStatus: the statuses a router answers the layer's errors with.
func ExampleStatus() {
	for _, err := range []error{
		&affinity.QuarantinedError{RetryAfter: 90 * time.Second},
		&affinity.UnknownOutcomeError{},
		affinity.ErrNoCandidates,
		&affinity.SessionIDError{Reason: "empty"},
		fmt.Errorf("waiting: %w", context.DeadlineExceeded),
	} {
		code, after := httpoutcome.Status(err)
		fmt.Println(code, after)
	}
	// Output:
	// 503 1m30s
	// 504 0s
	// 503 1s
	// 400 0s
	// 504 0s
}

// ExampleWriteError: the answer a client reads.
func ExampleWriteError() {
	w := httptest.NewRecorder()
	httpoutcome.WriteError(w, &affinity.QuarantinedError{RetryAfter: 1500 * time.Millisecond})
	fmt.Println(w.Code, w.Header().Get("Retry-After"))
	fmt.Print(w.Body.String())
	// Output:
	// 503 2
	// {"error":{"message":"the session is quarantined after an attempt whose outcome is unknown","type":"quarantined","code":503}}
}

// ExampleClient_Do: a worker that is not listening refuses the connection:
// nothing was sent, so the request may go to another worker; the release
// runs before Do returns.
func ExampleClient_Do() {
	worker := httptest.NewServer(http.NotFoundHandler())
	url := worker.URL
	worker.Close() // nobody listens there any more

	c := &httpoutcome.Client{}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(`{}`))
	_, out, err := c.Do(context.Background(), req, 1, func(e httpoutcome.End) {
		fmt.Println("released:", e.Kind, e.Outcome)
	})
	var fe *httpoutcome.ForwardError
	fmt.Println(out, errors.As(err, &fe) && !fe.Written)
	// Output:
	// released: no-response DefinitelyNotAccepted
	// DefinitelyNotAccepted true
}
