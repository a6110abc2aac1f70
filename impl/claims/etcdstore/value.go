package etcdstore

import (
	"encoding/json"
	"fmt"

	"github.com/placementlab/placement/impl/claims"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// claimValue is a claim's value in etcd.
type claimValue struct {
	Target  targetValue `json:"target"`
	Gen     int64       `json:"gen"`
	State   string      `json:"state"`
	Attempt uint64      `json:"attempt,omitempty"`
	// Born is the lineage's first revision (claims.Claim.Born), written
	// by the lineage's rewrites. The write that creates a lineage cannot
	// know its own revision and leaves it out: absent, Born is the
	// version's own mod revision. (Not the key's create revision: a stale
	// claim is replaced by a Put over the key, which keeps it.)
	Born int64 `json:"born,omitempty"`
	// Lease is the claim's lease (its idle expiry), as etcd also records
	// it on the key.
	Lease int64 `json:"lease"`
}

type targetValue struct {
	Worker  string `json:"worker"`
	Rank    int    `json:"rank,omitempty"`
	HasRank bool   `json:"has_rank,omitempty"`
}

// workerValue is a worker's registration in etcd.
type workerValue struct {
	Identity string `json:"identity"`
}

func encodeClaim(c claims.Claim, lease int64) string {
	// A struct of strings and numbers always encodes.
	b, _ := json.Marshal(claimValue{
		Target:  targetValue{Worker: c.Target.Worker, Rank: c.Target.Rank, HasRank: c.Target.HasRank},
		Gen:     c.Gen,
		State:   c.State.String(),
		Attempt: c.Attempt,
		Born:    c.Born,
		Lease:   lease,
	})
	return string(b)
}

// decodeClaim returns the claim of session key in kv, and its lease.
func decodeClaim(key string, kv *mvccpb.KeyValue) (claims.Claim, int64, error) {
	var v claimValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return claims.Claim{}, 0, fmt.Errorf("%w: claim %q at rev %d: %v", ErrCorrupt, key, kv.ModRevision, err)
	}
	var st claims.State
	switch v.State {
	case "bound":
		st = claims.Bound
	case "quarantined":
		st = claims.Quarantined
	case "closing":
		st = claims.Closing
	default:
		return claims.Claim{}, 0, fmt.Errorf("%w: claim %q at rev %d: state %q", ErrCorrupt, key, kv.ModRevision, v.State)
	}
	lease := kv.Lease
	if lease == 0 {
		lease = v.Lease
	}
	born := v.Born
	if born == 0 {
		born = kv.ModRevision
	}
	if born > kv.ModRevision {
		return claims.Claim{}, 0, fmt.Errorf("%w: claim %q at rev %d: born at %d", ErrCorrupt, key, kv.ModRevision, born)
	}
	return claims.Claim{
		Key:     key,
		Rev:     kv.ModRevision,
		Born:    born,
		Target:  claims.Target{Worker: v.Target.Worker, Rank: v.Target.Rank, HasRank: v.Target.HasRank},
		Gen:     v.Gen,
		State:   st,
		Attempt: v.Attempt,
	}, lease, nil
}

func encodeWorker(identity string) string {
	b, _ := json.Marshal(workerValue{Identity: identity})
	return string(b)
}

func decodeWorker(worker string, kv *mvccpb.KeyValue) (claims.Member, error) {
	var v workerValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return claims.Member{}, fmt.Errorf("%w: worker %q at rev %d: %v", ErrCorrupt, worker, kv.ModRevision, err)
	}
	return claims.Member{Worker: worker, Identity: v.Identity, Gen: kv.ModRevision}, nil
}
