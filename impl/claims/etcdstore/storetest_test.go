package etcdstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/storetest"
)

// TestContract runs the backend-neutral contract suite on real etcd (the
// shared one-member cluster, a prefix per subtest). Claims live 2 s idle;
// etcd's lessor checks expiry every 500 ms.
func TestContract(t *testing.T) {
	const idle = 2 * time.Second
	storetest.Run(t, storetest.Harness{
		Parallel:     true,
		EventTimeout: 10 * time.Second,
		Quiet:        200 * time.Millisecond,
		New: func(t *testing.T) (func(string) claims.Store, storetest.Controls) {
			o := newOpener(t, shared, idle)
			var mu sync.Mutex
			lossy := map[string][]*lossyKV{}
			open := func(replica string) claims.Store {
				kv := &lossyKV{}
				h := o.openWrapped(replica, func(cli *clientv3.Client) { kv.KV = cli.KV; cli.KV = kv })
				o.mu.Lock()
				o.handles[replica] = append(o.handles[replica], h)
				o.mu.Unlock()
				mu.Lock()
				lossy[replica] = append(lossy[replica], kv)
				mu.Unlock()
				return h
			}
			return open, storetest.Controls{
				IdleTTL:     idle,
				ExpirySlack: time.Second,
				Crash:       o.crash,
				LoseReply: func(replica, op string) {
					require.Equal(t, "move", op, "the etcd harness loses the replies of moves only")
					mu.Lock()
					defer mu.Unlock()
					for _, kv := range lossy[replica] {
						kv.armed.Store(true)
					}
				},
			}
		},
	})
}

// lossyKV is a client's KV that, once armed, loses the reply of the next
// conditional transaction (a Move's write): it is committed, and its
// answer replaced by gRPC's Unavailable, as when the connection drops
// after the request reached etcd. A hook set by beforeNext runs (once)
// right before the next conditional transaction is sent: another handle
// acts between a call's read and its write.
type lossyKV struct {
	clientv3.KV
	armed  atomic.Bool
	before atomic.Pointer[func()]
}

// beforeNext arms f to run before the next conditional transaction.
func (k *lossyKV) beforeNext(f func()) { k.before.Store(&f) }

// Txn implements clientv3.KV.
func (k *lossyKV) Txn(ctx context.Context) clientv3.Txn {
	return &lossyTxn{Txn: k.KV.Txn(ctx), kv: k}
}

// lossyTxn is a lossyKV's transaction.
type lossyTxn struct {
	clientv3.Txn
	kv    *lossyKV
	fence bool // it has an If
}

func (t *lossyTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	t.fence = t.fence || len(cs) > 0
	return t
}

func (t *lossyTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *lossyTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *lossyTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.fence {
		if h := t.kv.before.Swap(nil); h != nil {
			(*h)()
		}
	}
	resp, err := t.Txn.Commit()
	if err == nil && t.fence && t.kv.armed.CompareAndSwap(true, false) {
		return nil, status.Error(codes.Unavailable, "etcdstore test: injected lost reply")
	}
	return resp, err
}
