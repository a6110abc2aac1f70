// Command campaign runs the nightly campaign: every checker of the
// repository in rotation within a time budget, several at once, with a
// live progress line, a state file it continues from, and a report
// (summary.json, summary.md, index.html) naming each failure's seed,
// Porcupine visualization, log and the command that reproduces it. It
// exits non-zero on any failure and on any checker that could not run.
//
//	go run ./cmd/campaign -duration 5m -out campaign-report   # make campaign
//	go run ./cmd/campaign -duration 8h -out nightly -resume   # a night; continues a stopped one
//
// Its other subcommands are the campaign's workers and the commands its
// report prints:
//
//	campaign harness -name core -seed 7 -seeds 1 -ops 400   # one Porcupine harness run (GOMAXPROCS, -race via go run -race)
//	campaign recheck -name core history.json                # re-check a saved history
//	campaign promote -name core [-false-alarm] history.json # keep it as regression data under testdata
//	campaign explore -config spec/tla/MCClaims.cfg -set 'MaxRev = 4'
//	campaign cfg -config ... -set ... -o out.cfg             # the larger config, for TLC
//	campaign replay -seed 7 [-replicas]                     # the replay with its invariants
//	campaign burn                                           # a CPU-bound neighbour
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/placementlab/placement/internal/campaign"
)

func main() {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		os.Exit(sub(os.Args[1], os.Args[2:]))
	}
	os.Exit(runCampaign(os.Args[1:]))
}

func sub(name string, args []string) int {
	switch name {
	case "harness":
		return harnessCmd(args)
	case "recheck":
		return recheckCmd(args)
	case "promote":
		return promoteCmd(args)
	case "explore":
		return exploreCmd(args, false)
	case "cfg":
		return exploreCmd(args, true)
	case "replay":
		return replayCmd(args)
	case "burn":
		return burnCmd(args)
	}
	fmt.Fprintf(os.Stderr, "campaign: unknown command %q (harness, recheck, promote, explore, cfg, replay, burn; or flags to run a campaign)\n", name)
	return 2
}

func runCampaign(args []string) int {
	fs := newFlags("campaign")
	duration := fs.Duration("duration", 5*time.Minute, "the campaign's budget (8h for a night)")
	out := fs.String("out", "campaign-report", "the report directory (its state.json continues a stopped campaign with -resume)")
	seed := fs.Uint64("seed", 0, "the campaign's seed (0: drawn from the clock, and printed)")
	parallel := fs.Int("parallel", 0, "units at once (0: the number of cores)")
	only := fs.String("only", "", "comma-separated parts of checker names to run (empty: every checker)")
	resume := fs.Bool("resume", false, "continue the campaign whose state.json is in -out")
	list := fs.Bool("list", false, "list the checkers and exit")
	if fs.Parse(args) != nil {
		return 2
	}
	if *list {
		for _, c := range campaign.Checkers() {
			fmt.Printf("%-20s %-10s %s\n", c.Name, c.Kind, c.Doc)
		}
		return 0
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		return 2
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		return 2
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		return 2
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	if *parallel <= 0 {
		*parallel = runtime.NumCPU()
	}
	env := &campaign.Env{Root: root, Out: dir, Go: "go",
		Bin: filepath.Join(dir, "bin", "campaign"), Race: filepath.Join(dir, "bin", "campaign-race")}
	if jar := os.Getenv("TLA2TOOLS_JAR"); jar != "" {
		if _, err := os.Stat(jar); err == nil {
			env.Jar = jar
		}
	}
	if env.Jar == "" {
		fmt.Println("campaign: TLC is skipped: TLA2TOOLS_JAR names no TLC jar")
	}
	// The workers: this command, built without and with the race detector.
	for _, b := range []struct {
		bin  string
		args []string
	}{{env.Bin, nil}, {env.Race, []string{"-race"}}} {
		start := time.Now()
		cmd := exec.Command("go", append(append([]string{"build"}, b.args...), "-o", b.bin, "./cmd/campaign")...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "campaign: building the worker:", err)
			return 2
		}
		fmt.Printf("campaign: built %s in %v\n", filepath.Base(b.bin), time.Since(start).Round(time.Second))
	}
	cfg := campaign.Config{Budget: *duration, Seed: *seed, Parallel: *parallel, Progress: os.Stderr, TTY: isTTY(os.Stderr),
		Machine: fmt.Sprintf("%d cores, %s, %s/%s", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	c, err := campaign.New(cfg, env, campaign.Checkers(), *resume)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		return 2
	}
	st := c.State()
	fmt.Printf("campaign: seed %d, budget %v (%v spent before), %d at once, report in %s\n", st.Seed, st.Budget, st.Elapsed.Round(time.Second), cfg.Parallel, dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runErr := c.Run(ctx)
	if err := campaign.WriteReport(dir, st); err != nil {
		fmt.Fprintln(os.Stderr, "campaign: writing the report:", err)
		return 2
	}
	fmt.Print(campaign.Markdown(campaign.Summarize(st)))
	fmt.Printf("\ncampaign: report %s\n", filepath.Join(dir, "index.html"))
	if errors.Is(runErr, campaign.ErrStopped) {
		fmt.Printf("campaign: stopped after %v of %v; continue it with: go run ./cmd/campaign -out %s -resume\n", st.Elapsed.Round(time.Second), st.Budget, *out)
		return 3
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "campaign:", runErr)
		return 2
	}
	if st.Failed() {
		return 1
	}
	return 0
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s: run the campaign in the repository", dir)
		}
	}
}

func isTTY(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// burnCmd is a CPU-bound neighbour: it spins until killed (or for an
// hour, so that none outlives a campaign killed hard).
func burnCmd(args []string) int {
	fs := newFlags("burn")
	d := fs.Duration("for", time.Hour, "how long to spin at most")
	if fs.Parse(args) != nil {
		return 2
	}
	end := time.Now().Add(*d)
	x := uint64(1)
	for time.Now().Before(end) {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if x == 0 {
		fmt.Println(x)
	}
	return 0
}
