//go:build linux

// Package blackhole gives tests a loopback address whose connects hang, to
// check that a client bounds its connect (impl/httpoutcome, impl/router).
// Linux only: it relies on how Linux treats a full accept queue.
package blackhole

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Addr returns a loopback host:port whose connects hang: a listener with a
// backlog of 0 that never accepts, its one queue slot filled, so the kernel
// drops every further SYN (unprivileged). The listener and the connection
// that fills its queue are closed when t ends.
func Addr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for i := 0; ; i++ {
		require.Less(t, i, 8, "the accept queue never filled")
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			break // full: this connect hung
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	return addr
}
