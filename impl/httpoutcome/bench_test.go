package httpoutcome_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/placementlab/placement/impl/httpoutcome"
)

// benchWorker answers every request with a small body.
func benchWorker(b *testing.B) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "data: x\n\n")
	}))
	b.Cleanup(s.Close)
	return s
}

// BenchmarkRoundTrip is the baseline: the transport alone, a POST over
// loopback with its body read and closed.
func BenchmarkRoundTrip(b *testing.B) {
	s := benchWorker(b)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(`{}`))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// BenchmarkDo is the same exchange through Do, with a release.
func BenchmarkDo(b *testing.B) {
	s := benchWorker(b)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &httpoutcome.Client{Transport: tr}
	released := 0
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(`{}`))
		resp, _, err := c.Do(context.Background(), req, 1, func(httpoutcome.End) { released++ })
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	if released != b.N {
		b.Fatalf("%d releases for %d requests", released, b.N)
	}
}
