// Command claimsresult records what TLC reported for a claims config
// (spec/tla/MCClaims*.cfg) as JSON data that model/claims' tests compare
// the claims explorer against (spec/tla/results), in the format of
// model/cmd/tlcresult. With -dump it also reads TLC's state dump, parses
// every state into the claims model and records the hash of the whole
// state set (model.StateSetHash over the claims model's state keys).
// spec/tla/tlc.sh runs it for the MCClaims* configs.
//
//	go run ./model/claims/cmd/claimsresult -config spec/tla/MCClaims.cfg \
//	    -tlc-output tlc.out -dump states.dump -o spec/tla/results/MCClaims.json
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/placementlab/placement/model"
	"github.com/placementlab/placement/model/claims"
)

var (
	reCounts    = regexp.MustCompile(`^([\d,]+) states generated, ([\d,]+) distinct states found`)
	reDepth     = regexp.MustCompile(`depth of the complete state graph search is (\d+)`)
	reViolation = regexp.MustCompile(`^Error: (Invariant|Action property|Temporal property) (\w+) (?:is|was) violated`)
	reState     = regexp.MustCompile(`^State \d+: `)
	reVersion   = regexp.MustCompile(`^TLC2 Version (\S+)`)
	reFinished  = regexp.MustCompile(`^Finished in (?:(\d+)min )?(\d+)s`)
	reWorkers   = regexp.MustCompile(`with (\d+) workers?`)
)

// Result is the data recorded for one config.
type Result struct {
	Config       string     `json:"config"`
	TLCVersion   string     `json:"tlc_version"`
	Workers      int        `json:"workers"`
	Distinct     int64      `json:"distinct"`
	Generated    int64      `json:"generated"`
	Depth        int        `json:"depth"`
	Seconds      int        `json:"tlc_seconds"`
	StateSetHash string     `json:"state_set_hash,omitempty"`
	Violation    *Violation `json:"violation"`
}

// Violation is what TLC reported violated.
type Violation struct {
	Property    string `json:"property"`
	Kind        string `json:"kind"`
	TraceLength int    `json:"trace_length"`
}

func main() {
	cfgPath := flag.String("config", "", "the TLC config that was checked")
	outPath := flag.String("tlc-output", "", "TLC's standard output")
	dump := flag.String("dump", "", "TLC's -dump file (optional)")
	o := flag.String("o", "", "where to write the JSON result")
	flag.Parse()
	if err := run(*cfgPath, *outPath, *dump, *o); err != nil {
		fmt.Fprintln(os.Stderr, "tlcresult:", err)
		os.Exit(1)
	}
}

func num(s string) int64 {
	n, _ := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	return n
}

func run(cfgPath, outPath, dump, o string) error {
	if cfgPath == "" || outPath == "" || o == "" {
		return fmt.Errorf("-config, -tlc-output and -o are required")
	}
	f, err := os.Open(outPath)
	if err != nil {
		return err
	}
	defer f.Close()
	res := Result{Config: filepath.Base(cfgPath)}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if m := reVersion.FindStringSubmatch(line); m != nil {
			res.TLCVersion = m[1]
		}
		if m := reWorkers.FindStringSubmatch(line); m != nil && res.Workers == 0 {
			res.Workers, _ = strconv.Atoi(m[1])
		}
		if m := reCounts.FindStringSubmatch(line); m != nil {
			res.Generated, res.Distinct, done = num(m[1]), num(m[2]), true
		}
		if m := reDepth.FindStringSubmatch(line); m != nil {
			res.Depth, _ = strconv.Atoi(m[1])
		}
		if m := reFinished.FindStringSubmatch(line); m != nil {
			mins, _ := strconv.Atoi(m[1])
			secs, _ := strconv.Atoi(m[2])
			res.Seconds = mins*60 + secs
		}
		if m := reViolation.FindStringSubmatch(line); m != nil {
			kind := map[string]string{"Invariant": "invariant", "Action property": "action property",
				"Temporal property": "liveness"}[m[1]]
			res.Violation = &Violation{Property: m[2], Kind: kind}
		}
		if res.Violation != nil && reState.MatchString(line) {
			res.Violation.TraceLength++
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("%s: TLC did not finish (no state counts in its output)", outPath)
	}
	if dump != "" {
		if res.Violation != nil {
			return fmt.Errorf("a state dump of a violated config is partial; record it without -dump")
		}
		m, _, err := claims.ReadConfig(cfgPath)
		if err != nil {
			return err
		}
		df, err := os.Open(dump)
		if err != nil {
			return err
		}
		defer df.Close()
		seen := map[string]bool{}
		var keys []string
		err = m.ReadDump(bufio.NewReaderSize(df, 1<<20), func(s claims.State) error {
			k := s.Key()
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", dump, err)
		}
		if int64(len(keys)) != res.Distinct {
			return fmt.Errorf("%s holds %d distinct states, TLC reported %d", dump, len(keys), res.Distinct)
		}
		res.StateSetHash = model.StateSetHash(keys)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(o, append(b, '\n'), 0o644)
}
