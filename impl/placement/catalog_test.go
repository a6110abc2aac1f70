package placement

import (
	"sync"
	"testing"
)

// TestCatalog_SeenTargetsAreFound: a target's slot, once slot has returned
// it, is what every later lookup and slot of that target returns, while
// other goroutines add targets (each addition may copy the lock-free map)
// and look up targets never seen (which must not make slots); Generation
// of a target never seen is 1 and makes no slot.
func TestCatalog_SeenTargetsAreFound(t *testing.T) {
	c, _ := manual(t)
	if g := c.Generation(target{Worker: 1 << 40}); g != 1 {
		t.Fatalf("an unseen target's generation is %d, want 1", g)
	}
	if _, ok := c.catalog.lookup(target{Worker: 1 << 40}); ok {
		t.Fatal("Generation made a slot for a target it only read")
	}
	const writers, per = 4, 3000
	var wg sync.WaitGroup
	errs := make(chan string, writers+1)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			mine := make([]*targetSlot[target], 0, per)
			for i := 0; i < per; i++ {
				tg := target{Worker: uint64(w*per + i)}
				s := c.catalog.slot(tg)
				mine = append(mine, s)
				if got, ok := c.catalog.lookup(tg); !ok || got != s {
					errs <- "a target's slot was not found right after it was made"
					return
				}
				if i%97 == 0 {
					for j, s := range mine {
						if got, ok := c.catalog.lookup(target{Worker: uint64(w*per + j)}); !ok || got != s || c.catalog.slot(target{Worker: uint64(w*per + j)}) != s {
							errs <- "an earlier target's slot was lost or replaced"
							return
						}
					}
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < per; i++ {
			if _, ok := c.catalog.lookup(target{Worker: 1<<41 + uint64(i)}); ok {
				errs <- "a target never seen was found"
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
