package claimsconf

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	mc "github.com/placementlab/placement/model/claims"
	"pgregory.net/rapid"
)

// sideBySide is the rapid property: one run of up to opt.steps steps,
// each drawn among the model's enabled actions (first the action, then
// its instance), applied to both sides and compared.
func sideBySide(opt options, cov *coverage) func(*rapid.T) {
	return func(t *rapid.T) {
		e, err := newEnv(opt)
		if err != nil {
			t.Fatalf("setup: %v", err)
		}
		defer e.close()
		steps := rapid.IntRange(1, opt.steps).Draw(t, "steps")
		for range steps {
			en := e.enabled()
			// Faults (and expiry) one step in five: a run still
			// reaches the protocol's deeper states between them.
			var acts, faults []mc.Action
			for a := range en {
				if a.IsFault() || a == mc.ActExpire {
					faults = append(faults, a)
				} else {
					acts = append(acts, a)
				}
			}
			if len(faults) > 0 && (len(acts) == 0 || rapid.IntRange(0, 4).Draw(t, "fault?") == 0) {
				acts = faults
			}
			if len(acts) == 0 {
				break
			}
			sort.Slice(acts, func(i, j int) bool { return acts[i] < acts[j] })
			act := rapid.SampledFrom(acts).Draw(t, "action")
			// A move starts a new lineage and so cuts the deeper
			// states (deferred closes, quarantines) short: two of three
			// drawn moves are drawn again among the other actions.
			if act == mc.ActMove && len(acts) > 1 && rapid.IntRange(0, 2).Draw(t, "move?") != 0 {
				others := make([]mc.Action, 0, len(acts)-1)
				for _, a := range acts {
					if a != mc.ActMove {
						others = append(others, a)
					}
				}
				act = rapid.SampledFrom(others).Draw(t, "action")
			}
			l := rapid.SampledFrom(en[act]).Draw(t, "label")
			if err := e.step(l); err != nil {
				t.Fatalf("%v", err)
			}
		}
		if cov != nil {
			cov.add(e.cov)
		}
	}
}

// TestStoreMatchesModel drives memstore handles of three replicas and the
// model side by side (doc.go) and requires every outcome of every mapped
// action to occur. Reproduce a failure with the -rapid.seed rapid prints.
func TestStoreMatchesModel(t *testing.T) {
	var cov coverage
	for i := range 8 {
		t.Run(fmt.Sprintf("batch%d", i), func(t *testing.T) {
			rapid.Check(t, sideBySide(options{steps: 120}, &cov))
		})
	}
	t.Logf("coverage: %s", &cov)
	if miss := cov.missing(outcomes, 3); len(miss) > 0 {
		t.Fatalf("too thin: outcomes reached fewer than 3 times: %v", miss)
	}
	// Each rare outcome is pinned by TestScenarios; together they must
	// occur here too.
	if cov.count(rareOutcomes...) == 0 {
		t.Fatalf("too thin: none of %v reached", rareOutcomes)
	}
}

// TestEveryActionMapped: every action of the model is driven and has an
// outcome the main test requires, so a new spec action fails here until
// it is mapped.
func TestEveryActionMapped(t *testing.T) {
	driven := map[string]bool{}
	for _, a := range drivenActs {
		driven[a.String()] = true
	}
	for _, name := range mc.ActionNames {
		if !driven[name] {
			t.Errorf("model action %s is not driven", name)
		}
		found := false
		for _, o := range outcomes {
			if o == name || strings.HasPrefix(o, name+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("model action %s has no required outcome", name)
		}
	}
}
