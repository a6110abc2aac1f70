package campaign

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// command is one subprocess of a unit: its log (the command line, then
// its output) goes to logs/<checker>-<n>.log under the report directory.
type command struct {
	name string
	args []string
	env  []string
	// stdout, when set, receives the standard output apart from the log
	// (a worker's JSON lines).
	stdout *bytes.Buffer
}

// logPath is unit u's log file.
func (e *Env) logPath(u Unit) string {
	return filepath.Join(e.Out, "logs", fmt.Sprintf("%s-%d.log", u.Checker, u.N))
}

// run runs cmd in the module's root until it ends or ctx is done (then its
// whole process group is killed), with a CPU-bound neighbour beside it
// when u.Load. It returns the log's path and the exit error.
func (e *Env) run(ctx context.Context, u Unit, c command) (string, error) {
	log := e.logPath(u)
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return log, err
	}
	defer f.Close()
	fmt.Fprintf(f, "$ %s%s %s\n", envPrefix(c.env), c.name, strings.Join(c.args, " "))
	cmd := exec.Command(c.name, c.args...)
	cmd.Dir = e.Root
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stderr = f
	cmd.Stdout = f
	if c.stdout != nil {
		cmd.Stdout = c.stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return log, err
	}
	stopLoad := e.load(u)
	defer stopLoad()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		fmt.Fprintf(f, "campaign: killed: %v\n", ctx.Err())
	}
	if c.stdout != nil {
		f.Write(c.stdout.Bytes())
	}
	return log, err
}

// load starts a CPU-bound neighbour (the worker's burn command) when u
// asks for one, and returns what stops it.
func (e *Env) load(u Unit) func() {
	if !u.Load || e.Bin == "" {
		return func() {}
	}
	cmd := exec.Command(e.Bin, "burn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cmd.Start() != nil {
		return func() {}
	}
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
}

func envPrefix(env []string) string {
	if len(env) == 0 {
		return ""
	}
	return strings.Join(env, " ") + " "
}

// goTest is a go test command line for u (with -race when u.Race).
func (e *Env) goTest(u Unit, args ...string) command {
	a := []string{"test", "-count=1"}
	if u.Race {
		a = append(a, "-race")
	}
	return command{name: e.Go, args: append(a, args...), env: procsEnv(u)}
}

// procsEnv is the GOMAXPROCS setting of u, if any.
func procsEnv(u Unit) []string {
	if u.Procs > 0 {
		return []string{fmt.Sprintf("GOMAXPROCS=%d", u.Procs)}
	}
	return nil
}

// exitDetail says how a command ended, for a unit's detail.
func exitDetail(err error) string {
	if err == nil {
		return "exit 0"
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Sprintf("exit %d", ee.ExitCode())
	}
	return err.Error()
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// readFile returns the file's text, or "".
func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// countLines counts the lines of the file at path that contain s.
func countLines(path, s string) int {
	n := 0
	for _, l := range strings.Split(readFile(path), "\n") {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// firstMatch returns re's first match in the file at path, or "".
func firstMatch(path string, re *regexp.Regexp) string {
	return strings.TrimSpace(re.FindString(readFile(path)))
}

// firstSub returns re's first submatch in the file at path, or "".
func firstSub(path string, re *regexp.Regexp) string {
	if m := re.FindStringSubmatch(readFile(path)); m != nil {
		return m[1]
	}
	return ""
}

// lastLine returns the file's last non-empty line.
func lastLine(path string) string { return strings.TrimSpace(tail(path, 1)) }

// quoteArgs joins args as a shell command line, quoting what needs it.
func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " {}*$'\"|&;()<>") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
