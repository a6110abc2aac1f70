package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
)

// writesPerClaim is what a one-turn session writes to etcd through
// etcdstore: the fenced create, the Hold and the Close. The claim's
// lease is one of a deleted claim's, reused (etcdstore's leases.go): a
// Grant per in-flight turn in each reuse window (IdleTTL/16), not per
// claim.
const writesPerClaim = 3

// rawResult is the raw transaction rate of the embedded cluster, measured
// with etcd's own client: the limit the claims figures are read against.
type rawResult struct {
	clients  int // etcd clients, each a connection of its own
	inFlight int // transactions in flight per client
	txns     int
	errors   int
	elapsed  time.Duration
	cpu      time.Duration
}

func (r *rawResult) perSecond() float64 { return float64(r.txns) / r.elapsed.Seconds() }

// measureRaw runs, on clients etcd clients with inFlight goroutines each,
// for d, the transaction a claim's write is: a compare on a key's
// ModRevision and a put (a conditional create of a key no one else
// writes), and counts those that committed. No lease, no read: the
// cheapest write a claim could be, so the claims' share of it is an
// upper bound on what the layer leaves unused.
func measureRaw(ctx context.Context, cl *embedded.Cluster, prefix string, clients, inFlight int, d time.Duration) (*rawResult, error) {
	var clis []*clientv3.Client
	defer func() {
		for _, c := range clis {
			_ = c.Close()
		}
	}()
	for range clients {
		c, err := cl.NewClient()
		if err != nil {
			return nil, err
		}
		clis = append(clis, c)
	}
	res := &rawResult{clients: clients, inFlight: inFlight}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	cpu0, cpuOK := processCPU()
	t0 := time.Now()
	deadline := t0.Add(d)
	val := string(make([]byte, 96)) // about a claim's encoded size
	for ci, c := range clis {
		for g := range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, errs := 0, 0
				var ferr error
				for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
					k := fmt.Sprintf("%sraw/c%d-g%d-%d", prefix, ci, g, i)
					tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := c.Txn(tctx).
						If(clientv3.Compare(clientv3.ModRevision(k), "=", 0)).
						Then(clientv3.OpPut(k, val)).
						Commit()
					cancel()
					if err != nil {
						errs++
						if ferr == nil {
							ferr = err
						}
						continue
					}
					n++
				}
				mu.Lock()
				res.txns += n
				res.errors += errs
				if firstErr == nil {
					firstErr = ferr
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	res.elapsed = time.Since(t0)
	if cpu1, ok := processCPU(); ok && cpuOK {
		res.cpu = cpu1 - cpu0
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if res.txns == 0 {
		return nil, fmt.Errorf("no transaction committed: %v", firstErr)
	}
	return res, nil
}
