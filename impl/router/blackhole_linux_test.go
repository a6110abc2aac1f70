//go:build linux

package router_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/placementlab/placement/internal/blackhole"
)

// blackHole returns the URL of a loopback address whose connects hang
// (blackhole.Addr).
func blackHole(t *testing.T) *url.URL {
	t.Helper()
	addr := blackhole.Addr(t)
	t.Cleanup(func() {
		// Pending dials of the default transport end now, not at its
		// dialer's timeout.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return &url.URL{Scheme: "http", Host: addr}
}
