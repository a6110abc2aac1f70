// Package childproc runs the test binary again as a child process that
// answers in JSON lines, for tests whose replicas are separate processes
// (impl/claims/dirstore, impl/replica). The child is the same binary,
// started with -test.run=^$ and an environment variable its TestMain
// looks for.
package childproc

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Proc is a running child whose standard output is a stream of JSON
// values of type L, one per line.
type Proc[L any] struct {
	// Cmd is the child's command (Wait on it, or signal its Process).
	Cmd *exec.Cmd
	// Stdin is the child's standard input.
	Stdin io.WriteCloser
	lines chan L
}

// Start re-executes the running test binary, running no tests, with env
// added to this process's environment. A line of output that does not
// parse as an L becomes unparsable(the line). The child is killed and
// waited for when the test ends.
func Start[L any](t testing.TB, unparsable func(text string) L, env ...string) *Proc[L] {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &Proc[L]{Cmd: cmd, Stdin: stdin, lines: make(chan L, 1024)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l L
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = unparsable(sc.Text())
			}
			p.lines <- l
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// Next returns the child's next line. It fails the test when the child's
// output ended or nothing came within d; who names the child in the
// failure.
func (p *Proc[L]) Next(t testing.TB, d time.Duration, who string) L {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(t, ok, "%s: its output ended", who)
		return l
	case <-time.After(d):
		t.Fatalf("%s: no output within %v", who, d)
	}
	var zero L
	return zero
}
