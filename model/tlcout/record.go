package tlcout

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// StateSetHash is the SHA-256 of a set of state keys, independent of order.
func StateSetHash(keys []string) string {
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, k := range sorted {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write([]byte(k))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DumpKeys reads a TLC -dump file of the config at cfgPath into the model
// that config describes, calling yield with each state's canonical key (the
// key the model's explorer hashes).
type DumpKeys func(cfgPath string, dump io.Reader, yield func(key string)) error

// ErrPartialDump is returned by Record for a state dump of a config TLC
// found violated: TLC stopped early, so the dump holds only some states.
var ErrPartialDump = errors.New("a state dump of a violated config is partial; record it without -dump")

// Record writes to o, as WriteResult does, what TLC reported in outPath,
// its standard output, for the config at cfgPath. With a dump (TLC's -dump
// file; "" for none) it also reads every state in it with keys and records
// the StateSetHash of their keys, after checking they are as many distinct
// states as TLC reported.
func Record(cfgPath, outPath, dump, o string, keys DumpKeys) error {
	if cfgPath == "" || outPath == "" || o == "" {
		return fmt.Errorf("-config, -tlc-output and -o are required")
	}
	f, err := os.Open(outPath)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := ParseOutput(f, filepath.Base(cfgPath))
	if err != nil {
		return fmt.Errorf("%s: %w", outPath, err)
	}
	if dump != "" {
		if res.Violation != nil {
			return ErrPartialDump
		}
		df, err := os.Open(dump)
		if err != nil {
			return err
		}
		defer df.Close()
		seen := map[string]bool{}
		var all []string
		err = keys(cfgPath, bufio.NewReaderSize(df, 1<<20), func(k string) {
			if !seen[k] {
				seen[k] = true
				all = append(all, k)
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", dump, err)
		}
		if int64(len(all)) != res.Distinct {
			return fmt.Errorf("%s holds %d distinct states, TLC reported %d", dump, len(all), res.Distinct)
		}
		res.StateSetHash = StateSetHash(all)
	}
	return WriteResult(o, res)
}

// Main is the body of a command that records a TLC run (model/cmd/tlcresult,
// model/claims/cmd/claimsresult): it reads the flags -config, -tlc-output,
// -dump and -o, calls Record and exits with status 1, the error printed after
// name, if it fails.
func Main(name string, keys DumpKeys) {
	cfgPath := flag.String("config", "", "the TLC config that was checked")
	outPath := flag.String("tlc-output", "", "TLC's standard output")
	dump := flag.String("dump", "", "TLC's -dump file (optional)")
	o := flag.String("o", "", "where to write the JSON result")
	flag.Parse()
	if err := Record(*cfgPath, *outPath, *dump, *o, keys); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
