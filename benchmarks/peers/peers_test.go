package peers

import "testing"

// bigN is the large table's size: 100,000, or 20,000 with -short (CI's
// smoke run).
func bigN() int {
	if testing.Short() {
		return 20000
	}
	return 100000
}

func TestContendersBehave(t *testing.T) {
	for _, c := range Contenders() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckCanFail: a contender that never expires fails the idle check,
// and one that misses after bind fails the basic check.
func TestCheckCanFail(t *testing.T) {
	clk := new(ManualClock)
	p := NewXsyncBare(16, clk, 0) // TTL 0 ...
	defer p.Close()
	if err := checkBasic(p); err == nil {
		t.Fatal("checkBasic passed a table whose idle bindings expire at once")
	}
	q := NewXsyncBare(16, clk, 1<<62) // ... and one that never expires
	defer q.Close()
	if err := checkIdle(q, 1000, clk.Advance); err == nil {
		t.Fatal("checkIdle passed a table that never expires")
	}
}

func BenchmarkPeers(b *testing.B) {
	for _, w := range Workloads(bigN()) {
		for _, c := range Contenders() {
			b.Run(w.Name+"/"+c.Name, func(b *testing.B) { w.Run(b, c) })
		}
	}
}
