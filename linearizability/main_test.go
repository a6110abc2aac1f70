package linearizability

import (
	"flag"
	"os"
	"testing"
)

// TestMain raises rapid's defaults (100 checks of up to 100 steps) unless
// the command line sets them.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rapid.checks"] && os.Getenv("RAPID_CHECKS") == "" {
		_ = flag.Set("rapid.checks", "300")
	}
	if !set["rapid.steps"] && os.Getenv("RAPID_STEPS") == "" {
		_ = flag.Set("rapid.steps", "300")
	}
	os.Exit(m.Run())
}
