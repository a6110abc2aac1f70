package affinityprom_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/placementlab/placement/impl/affinity"
	"github.com/placementlab/placement/impl/affinityprom"
	"github.com/placementlab/placement/impl/placement"
)

// A router registers the layer's collector, here on a fresh registry (in
// a router: served with promhttp.HandlerFor), and every scrape reads the
// layer's Stats once.
func Example() {
	l, err := affinity.New(affinity.Config{Clock: placement.NewManualClock(0)})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	if _, err := l.Join(affinity.Worker{ID: "gpu-0", Identity: "boot-1"}); err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(affinityprom.NewCollector(l, affinityprom.Options{
		ConstLabels: prometheus.Labels{"router": "r1"},
	}))

	// Two turns of one session: the first binds it, the second is a hit.
	k, err := affinity.Namespace{Model: "llama"}.Session("conversation-42")
	if err != nil {
		panic(err)
	}
	for range 2 {
		t, err := l.Start(context.Background(), affinity.Request{Session: k})
		if err != nil {
			panic(err)
		}
		a, err := t.Dispatch(affinity.WorkerOnly("gpu-0"))
		if err != nil {
			panic(err)
		}
		if err := a.Complete(placement.Accepted); err != nil {
			panic(err)
		}
		t.Done()
	}

	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "placement_affinity_hits_total", "placement_affinity_binds_total":
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetCounter().GetValue())
		case "placement_affinity_worker_bound_sessions", "placement_affinity_worker_up":
			for _, m := range mf.GetMetric() {
				fmt.Print(mf.GetName(), "{")
				for i, lp := range m.GetLabel() {
					if i > 0 {
						fmt.Print(",")
					}
					fmt.Printf("%s=%q", lp.GetName(), lp.GetValue())
				}
				fmt.Println("}", m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// placement_affinity_binds_total 1
	// placement_affinity_hits_total 1
	// placement_affinity_worker_bound_sessions{router="r1",worker="gpu-0"} 1
	// placement_affinity_worker_up{router="r1",worker="gpu-0"} 1
}
