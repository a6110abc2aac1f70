package httpoutcome_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/httpoutcome"
)

// rawServer is a TCP server on loopback whose connections handle runs: a
// worker that misbehaves at the byte level. Close (a t.Cleanup) closes the
// listener and every connection and waits for the handlers.
type rawServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

func newRawServer(t *testing.T, handle func(c net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &rawServer{ln: ln, done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

func (s *rawServer) URL() string { return "http://" + s.ln.Addr().String() }

func (s *rawServer) Close() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	_ = s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// readRequest reads one whole request (headers and body) from br.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return req, err
}

// reset closes c with an RST (SO_LINGER 0).
func reset(c net.Conn) {
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()
}

// recorder records what a release receives.
type recorder struct {
	mu   sync.Mutex
	ends []httpoutcome.End
	ch   chan struct{} // closed at the first release
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{})} }

func (r *recorder) release(e httpoutcome.End) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, e)
	if len(r.ends) == 1 {
		close(r.ch)
	}
}

// only returns the one End released, failing unless there is exactly one.
func (r *recorder) only(t *testing.T) httpoutcome.End {
	t.Helper()
	select {
	case <-r.ch:
	case <-time.After(5 * time.Second):
		t.Fatal("release never ran")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.ends, 1, "release must run exactly once")
	return r.ends[0]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ends)
}

// newClient returns a Client on a transport of its own (closed at the
// end of the test), so tests never share idle connections.
func newClient(t *testing.T) (*httpoutcome.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &httpoutcome.Client{Transport: tr}, tr
}

func post(t *testing.T, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func get(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/v1/models", nil)
	require.NoError(t, err)
	return req
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
