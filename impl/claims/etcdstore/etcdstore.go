// Package etcdstore is the etcd backend of impl/claims: the claim store
// router replicas share, in etcd (docs/claims.md).
//
// Keys, under claims.Options.Prefix:
//
//	claims/<key>                 a session's claim: JSON {target, gen, state, attempt, lease},
//	                             written under a lease no other key is on, of IdleTTL (idle
//	                             expiry is the lease's expiry; Touch keeps it alive); a
//	                             deleted claim's lease may carry the store's next new claim
//	                             (leases.go: the TTL is then IdleTTL plus a reuse window)
//	holders/<key>/<replica>      a replica's hold on the claim (key and replica path-escaped),
//	                             on the store's session lease: it vanishes with the process
//	workers/<worker>             a worker's registration {identity}, on the session lease;
//	                             the worker's generation is this key's mod revision
//	replica-id                   the replica-id counter
//
// A claim's Rev is its key's mod revision; every write of a claim is a
// transaction fenced on it (If(ModRevision == seen)), so a write through a
// revision that is not current changes nothing. Events watches claims/ and
// workers/ (with the previous values, and requiring a leader) and turns
// each replaced or deleted claim revision into a Delete; a compaction, a
// cancelled or closed watch, a lost leader, a lost session, a slow
// consumer, or a call that found the store unreachable becomes a Reset,
// sent once the store answers again, and the watch resumes from the
// revision read then. A Closing claim whose last holder's process died
// (its hold vanished with its session lease, without the Unhold that
// deletes the claim) is deleted by the event streams (see Events).
//
// The session lease outlives outages it can: a session whose keepalives
// went unanswered for its TTL (a quorum loss, a whole-cluster restart, a
// cut connection) is taken up again on the same lease when etcd answers,
// as long as the lease lives there (a new leader renews every lease), by
// the store itself even when no call comes; holds and registrations on it
// stay, and the workers keep their generations. Only a lease that did
// expire (or was revoked) is replaced: the registrations the store wrote
// and nobody replaced since are then written again on the new lease,
// under new generations (the old registrations ended, and every replica
// saw the workers leave).
//
// Errors: a store that cannot be reached (a connection down or dropped
// mid-call, even when etcd's client reports it as a bare io.EOF, no
// leader, a deadline exceeded, the caller's included) is a
// *claims.UnavailableError, and every event stream of the Store then sends
// a Reset once etcd answers again (a replica reconciles what it did
// meanwhile after that Reset); a fence that does not hold is
// claims.ErrClaimMoved or a *claims.FencedError, as claims.Store says.
//
// Costs in round trips: CreateOrGet of a current claim 1 (one read of the
// claim and the workers' generations), of a new one 2 when a lease of a
// claim this store deleted can be reused (leases.go), 3 otherwise (the
// Grant); Get, Hold, Register, Deregister, Members 1; Touch,
// Unhold, ReplicaID 2; Close 1 when this store's Hold read the claim at
// the revision the Close is fenced by (a Hold's transaction reads the
// claim it fenced on: the value etcd keeps at that ModRevision, so the
// Close writes from it without a read of its own), 2 otherwise;
// Quarantine, Resolve 2; each plus a KeepAliveOnce
// when they rewrite the claim (a write restarts its idle expiry; when that
// keepalive finds etcd unreachable, the write stands and the store is
// marked down); Move 3 (a read of the claim and the target's
// registration, the fenced write, the KeepAliveOnce; a refusal 1, or 2
// when the write finds it). Every verdict a call returns is judged from one answer of
// etcd (one range or transaction, at one revision, or one keepalive):
// Resolve's "stale" from the read in its fenced transaction's Else branch,
// never from two reads.
//
// The package does not import etcd's server: package embedded (tests,
// examples) runs one in-process.
package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/placementlab/placement/impl/claims"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of the settings Options change.
const (
	// DefaultSessionTTL is the TTL of the store's session lease, which
	// holds and registrations live on: they vanish this long after the
	// process stops renewing it.
	DefaultSessionTTL = 10 * time.Second
	// DefaultRequestTimeout bounds every call to etcd whose context has no
	// earlier deadline.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultProbeInterval is how often an event stream checks that the
	// store answers (a linearizable read of one key), so that an outage
	// with no calls in it still ends in a Reset.
	DefaultProbeInterval = time.Second
	// DefaultProbeTimeout is how long a probe waits for the answer.
	DefaultProbeTimeout = 2 * time.Second
	// DefaultEventBuffer is how many events a stream queues for a slow
	// consumer before it replaces them by a Reset.
	DefaultEventBuffer = 1024
)

var (
	// ErrCorrupt: a value in the store is not what this package writes.
	ErrCorrupt = errors.New("etcdstore: corrupt value")
	// ErrReplicaIDsExhausted: every replica id up to claims.MaxReplicaID
	// was handed out.
	ErrReplicaIDsExhausted = errors.New("etcdstore: replica ids exhausted")
)

// Option changes a setting of New.
type Option func(*settings)

type settings struct {
	sessionTTL     time.Duration
	requestTimeout time.Duration
	probeInterval  time.Duration
	probeTimeout   time.Duration
	eventBuffer    int

	// beforeWatch, if set (tests), runs before each watch starts from
	// revision rev+1.
	beforeWatch func(rev int64)
}

// WithSessionTTL sets the session lease's TTL (rounded up to seconds;
// etcd raises a TTL under its minimum, 1.5 election timeouts).
func WithSessionTTL(d time.Duration) Option { return func(s *settings) { s.sessionTTL = d } }

// WithRequestTimeout sets the bound of each call to etcd.
func WithRequestTimeout(d time.Duration) Option {
	return func(s *settings) { s.requestTimeout = d }
}

// WithProbe sets how often an event stream probes the store and how long a
// probe waits.
func WithProbe(interval, timeout time.Duration) Option {
	return func(s *settings) { s.probeInterval, s.probeTimeout = interval, timeout }
}

// WithEventBuffer sets how many events a stream queues for a slow
// consumer before replacing them by a Reset.
func WithEventBuffer(n int) Option { return func(s *settings) { s.eventBuffer = n } }

// Store is a claims.Store on etcd. It does not own its client: close the
// client after Shutdown.
type Store struct {
	cli     *clientv3.Client
	replica string
	idleTTL time.Duration
	leases  *leasePool // the claim leases, reused (leases.go)
	sessTTL int64      // seconds
	set     settings

	prefix   string
	kClaims  string
	kHolders string
	kWorkers string
	kCounter string

	ctx    context.Context // ends at Shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup // event streams and the session keeper

	sessMu sync.Mutex // serializes making a new session

	mu     sync.Mutex
	closed bool
	sess   *concurrency.Session
	held   map[string]map[string]struct{} // key → replicas holding it through this store
	// known is, for a key held through this store, its claim as the
	// store read it at a revision (by a Hold's fenced transaction): the
	// value etcd keeps at that ModRevision, so that a Close fenced by the
	// same revision needs no read of its own. Bounded by held: an entry
	// goes when its key's last hold does.
	known map[string]knownClaim
	regs  map[string]registration // worker → the registration this store wrote on its session lease
	rereg bool                    // the session's lease is new and regs are not all written on it yet
	lost  chan struct{}           // closed (and replaced) when a call finds the store unreachable
}

var _ claims.Store = (*Store)(nil)

// New returns a Store of replica on client, with opts (claims' defaults
// for zero fields). It starts the store's session (a lease kept alive by
// client), so it fails with a *claims.UnavailableError when etcd cannot be
// reached.
func New(ctx context.Context, client *clientv3.Client, replica string, opts claims.Options, options ...Option) (*Store, error) {
	switch {
	case ctx == nil:
		return nil, invalid("new", "nil context")
	case client == nil:
		return nil, invalid("new", "nil client")
	case replica == "":
		return nil, invalid("new", "empty replica")
	case opts.IdleTTL < 0:
		return nil, invalid("new", fmt.Sprintf("negative idle TTL %v", opts.IdleTTL))
	}
	set := settings{
		sessionTTL:     DefaultSessionTTL,
		requestTimeout: DefaultRequestTimeout,
		probeInterval:  DefaultProbeInterval,
		probeTimeout:   DefaultProbeTimeout,
		eventBuffer:    DefaultEventBuffer,
	}
	for _, o := range options {
		if o != nil {
			o(&set)
		}
	}
	switch {
	case set.sessionTTL <= 0:
		return nil, invalid("new", "session TTL not positive")
	case set.requestTimeout <= 0:
		return nil, invalid("new", "request timeout not positive")
	case set.probeInterval <= 0 || set.probeTimeout <= 0:
		return nil, invalid("new", "probe interval or timeout not positive")
	case set.eventBuffer <= 0:
		return nil, invalid("new", "event buffer not positive")
	}
	if opts.IdleTTL == 0 {
		opts.IdleTTL = claims.DefaultIdleTTL
	}
	if opts.Prefix == "" {
		opts.Prefix = claims.DefaultPrefix
	}
	s := &Store{
		cli:      client,
		replica:  replica,
		idleTTL:  opts.IdleTTL,
		leases:   newLeasePool(opts.IdleTTL, set.requestTimeout),
		sessTTL:  seconds(set.sessionTTL),
		set:      set,
		prefix:   opts.Prefix,
		kClaims:  opts.Prefix + "claims/",
		kHolders: opts.Prefix + "holders/",
		kWorkers: opts.Prefix + "workers/",
		kCounter: opts.Prefix + "replica-id",
		held:     map[string]map[string]struct{}{},
		known:    map[string]knownClaim{},
		regs:     map[string]registration{},
		lost:     make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	octx, done := s.opContext(ctx)
	defer done()
	if _, err := s.session(octx); err != nil {
		err = s.fail(octx, "new", err)
		s.cancel()
		return nil, err
	}
	s.wg.Add(1)
	go s.keep()
	return s, nil
}

// seconds rounds d up to whole seconds, at least one.
func seconds(d time.Duration) int64 {
	n := int64((d + time.Second - 1) / time.Second)
	return max(n, 1)
}

// Replica returns the replica name the store was made for.
func (s *Store) Replica() string { return s.replica }

// IdleTTL returns the claims' idle time-to-live (etcd leases count whole
// seconds: the claim leases' TTL is this rounded up, plus the window in
// which a lease may be reused, leases.go).
func (s *Store) IdleTTL() time.Duration { return s.idleTTL }

// Prefix returns the key prefix the store writes under.
func (s *Store) Prefix() string { return s.prefix }

// ClaimKey returns the etcd key of key's claim.
func (s *Store) ClaimKey(key string) string { return s.kClaims + key }

// holdersOf returns the prefix of key's holder keys.
func (s *Store) holdersOf(key string) string { return s.kHolders + url.PathEscape(key) + "/" }

func (s *Store) holderKey(key, replica string) string {
	return s.holdersOf(key) + url.PathEscape(replica)
}

func (s *Store) workerKey(worker string) string { return s.kWorkers + worker }

// begin checks a call's context and the store, and returns the context
// the call's requests run under (bounded by the request timeout, ended by
// Shutdown) and its release.
func (s *Store) begin(ctx context.Context, op string) (context.Context, func(), error) {
	if ctx == nil {
		return nil, nil, invalid(op, "nil context")
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, nil, fmt.Errorf("etcdstore: %s: %w", op, claims.ErrClosed)
	}
	octx, done := s.opContext(ctx)
	return octx, done, nil
}

func (s *Store) opContext(ctx context.Context) (context.Context, func()) {
	octx, cancel := context.WithTimeout(ctx, s.set.requestTimeout)
	stop := context.AfterFunc(s.ctx, cancel)
	return octx, func() { stop(); cancel() }
}

// fail turns an error of a call made under the caller's ctx into what
// claims.Store promises: a corrupt value's (ErrCorrupt) as is, ErrClosed
// after Shutdown, the caller's own cancellation as is, a
// *claims.UnavailableError when etcd could not be reached (and the event
// streams then owe a Reset).
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if errors.Is(err, ErrCorrupt) {
		return err
	}
	if s.ctx.Err() != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, claims.ErrClosed)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("etcdstore: %s: %w", op, ctx.Err())
	}
	if unreachable(err) {
		s.markLost()
		return &claims.UnavailableError{Op: op, Err: err}
	}
	return fmt.Errorf("etcdstore: %s: %w", op, err)
}

// unreachable reports whether err says etcd could not be reached or could
// not serve (no leader, timeouts, overload, a connection that dropped or
// broke), rather than refused a request. A gRPC status or etcd error is
// judged by its code; anything else by whether it is a transport's error
// (etcd's client returns a dropped connection's io.EOF bare from a
// stream, KeepAliveOnce's), a network error, or no endpoint to use.
func unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	} else {
		return transportError(err)
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Canceled, codes.Aborted:
		return true
	case codes.Internal:
		// etcd's server never answers Internal: it is gRPC's, for a
		// broken transport (a corrupted or cut HTTP/2 stream), which
		// etcd's client retries as it retries Unavailable.
		return !mutant("EOFNotUnavailable")
	}
	return false
}

// transportError reports whether err (not a gRPC status) is a transport's:
// a connection that ended (io.EOF, io.ErrUnexpectedEOF, a closed pipe or
// connection), a network error, or no endpoint to use.
func transportError(err error) bool {
	if mutant("EOFNotUnavailable") {
		return false
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, clientv3.ErrNoAvailableEndpoints) || errors.As(err, &ne)
}

// markLost tells the event streams that a call found the store
// unreachable: each owes a Reset once the store answers again.
func (s *Store) markLost() {
	s.mu.Lock()
	close(s.lost)
	s.lost = make(chan struct{})
	s.mu.Unlock()
}

func (s *Store) lostSignal() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// registration is a worker's registration this store wrote: the value
// and the generation (its revision).
type registration struct {
	value string
	gen   int64
}

// session returns the store's live session. When the last one ended on
// this side (its keepalives went unanswered for a TTL: no quorum, the
// cluster restarting, the connection cut), its lease may still live in
// etcd, which renews every lease when a leader is elected: the session is
// taken up again on that lease, and the holds and registrations on it
// stay as they are (the same generations). Only when the lease is gone
// (it expired, or was revoked) is a new one granted: the holds made on
// the old one are gone, and the registrations this store wrote and
// nobody replaced since are written again on the new lease (see
// reregister).
func (s *Store) session(ctx context.Context) (*concurrency.Session, error) {
	if sess := s.liveSession(); sess != nil {
		return sess, nil
	}
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if sess := s.liveSession(); sess != nil {
		return sess, nil
	}
	s.mu.Lock()
	closed, prev := s.closed, s.sess
	s.mu.Unlock()
	if closed {
		return nil, claims.ErrClosed
	}
	if prev != nil && !mutant("SessionNotResumed") {
		_, err := s.cli.KeepAliveOnce(ctx, prev.Lease())
		if err == nil {
			sess, err := s.newSession(prev.Lease())
			if err != nil {
				return nil, err
			}
			return s.install(sess, false)
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, err
		}
	}
	g, err := s.cli.Grant(ctx, s.sessTTL)
	if err != nil {
		return nil, err
	}
	sess, err := s.newSession(g.ID)
	if err != nil {
		return nil, err
	}
	if _, err := s.install(sess, true); err != nil {
		return nil, err
	}
	if err := s.reregister(ctx); err != nil {
		return nil, err // the keeper tries again
	}
	return sess, nil
}

func (s *Store) newSession(lease clientv3.LeaseID) (*concurrency.Session, error) {
	return concurrency.NewSession(s.cli, concurrency.WithLease(lease),
		concurrency.WithContext(s.ctx), concurrency.WithTTL(int(s.sessTTL)))
}

// install makes sess the store's session (fresh: on a new lease, which
// holds nothing yet). After Shutdown it ends sess instead (revoking a
// fresh lease nobody else knows) and fails with claims.ErrClosed.
func (s *Store) install(sess *concurrency.Session, fresh bool) (*concurrency.Session, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sess.Orphan()
		if fresh {
			rctx, cancel := context.WithTimeout(context.Background(), s.set.requestTimeout)
			_, _ = s.cli.Revoke(rctx, sess.Lease())
			cancel()
		}
		return nil, claims.ErrClosed
	}
	s.sess = sess
	if fresh {
		s.held = map[string]map[string]struct{}{}
		s.known = map[string]knownClaim{}
		s.rereg = true
	}
	s.mu.Unlock()
	return sess, nil
}

// reregister writes again, on the session lease just started, each
// registration this store wrote that vanished with its old lease: a
// worker that survived the store's outage is not dropped from membership.
// Each is fenced by the worker having no registration (one written by
// another store meanwhile stands, and this store forgets its own). The
// old one ended (its lease expired: every replica saw the worker leave),
// so this is a registration after the previous one ended, with a new
// generation (claims.Member); an outage the lease outlived keeps the old
// one and its generation instead (session). It is done once per new
// lease: a try that fails (or whose outcome is unknown) is tried again by
// the session keeper, and a registration it finds already on the lease
// is its own earlier try's.
func (s *Store) reregister(ctx context.Context) error {
	s.mu.Lock()
	if !s.rereg || s.sess == nil {
		s.mu.Unlock()
		return nil
	}
	lease := s.sess.Lease()
	regs := make(map[string]registration, len(s.regs))
	for w, r := range s.regs {
		regs[w] = r
	}
	if mutant("RegistrationsNotRewritten") {
		clear(s.regs)
		clear(regs)
	}
	s.mu.Unlock()
	for w, r := range regs {
		key := s.workerKey(w)
		tr, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, r.value, clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return err
		}
		gen := tr.Header.Revision
		if !tr.Succeeded {
			gen = 0
			if kv := firstKV(tr.Responses[0].GetResponseRange().Kvs); kv != nil && kv.Lease == int64(lease) && string(kv.Value) == r.value {
				gen = kv.ModRevision // this store's earlier try
			}
		}
		s.mu.Lock()
		if cur, ok := s.regs[w]; ok && cur == r {
			if gen != 0 {
				s.regs[w] = registration{value: r.value, gen: gen}
			} else {
				delete(s.regs, w)
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	if s.sess != nil && s.sess.Lease() == lease {
		s.rereg = false
	}
	s.mu.Unlock()
	return nil
}

// reregPending reports whether the session's lease still owes the
// registrations (reregister).
func (s *Store) reregPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rereg
}

// keep keeps the store's session alive between calls: when it ends, it
// takes it up again (or starts a new one) as soon as etcd answers, so that
// the holds and registrations on it outlive an outage the lease outlives
// although no call comes. Its tries are at most a quarter of the session
// TTL apart: a new leader renews the lease for one TTL. It ends at
// Shutdown.
func (s *Store) keep() {
	defer s.wg.Done()
	maxBackoff := min(time.Second, time.Duration(s.sessTTL)*time.Second/4)
	for {
		s.mu.Lock()
		sess := s.sess
		s.mu.Unlock()
		if sess != nil && !s.reregPending() {
			select {
			case <-sess.Done():
			case <-s.ctx.Done():
				return
			}
		}
		backoff := 20 * time.Millisecond
		for {
			octx, done := s.opContext(s.ctx)
			_, err := s.session(octx)
			if err == nil {
				err = s.reregister(octx)
			}
			if err != nil {
				_ = s.fail(octx, "session", err)
			}
			done()
			if err == nil {
				break
			}
			t := time.NewTimer(backoff)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// noteRegistration records the registration of worker this store wrote
// (value, at revision gen) on its session lease.
func (s *Store) noteRegistration(worker, value string, gen int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs[worker] = registration{value: value, gen: gen}
}

// forgetRegistration forgets worker's registration by this store: it was
// deregistered, or another registration replaced it (one written after
// rev, when rev > 0).
func (s *Store) forgetRegistration(worker string, after int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.regs[worker]; ok && (after == 0 || r.gen < after) {
		delete(s.regs, worker)
	}
}

func (s *Store) liveSession() *concurrency.Session {
	s.mu.Lock()
	sess := s.sess
	s.mu.Unlock()
	if sess == nil {
		return nil
	}
	select {
	case <-sess.Done():
		return nil
	default:
		return sess
	}
}

// SessionLease returns the lease the store's holds and registrations live
// on (0 when it has none: after Shutdown, or while it makes a new one).
func (s *Store) SessionLease() clientv3.LeaseID {
	if sess := s.liveSession(); sess != nil {
		return sess.Lease()
	}
	return clientv3.NoLease
}

// knownClaim is a claim as etcd kept it at one ModRevision, and its lease.
type knownClaim struct {
	rev   int64
	c     claims.Claim
	lease int64
}

// claimAt returns key's claim at rev if this store knows it without a
// read (a Hold fenced by rev read it).
func (s *Store) claimAt(key string, rev int64) (claims.Claim, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.known[key]
	if !ok || (k.rev != rev && !mutant("CloseTrustsOldRead")) {
		return claims.Claim{}, 0, false
	}
	return k.c, k.lease, true
}

// track notes that replica holds key through this store; kc, when its
// rev is not 0, is the claim the Hold read at the revision it was fenced
// by.
func (s *Store) track(key, replica string, kc knownClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		return
	}
	if kc.rev != 0 {
		s.known[key] = kc
	}
	m := s.held[key]
	if m == nil {
		m = map[string]struct{}{}
		s.held[key] = m
	}
	m[replica] = struct{}{}
}

func (s *Store) untrack(key, replica string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.held[key]; m != nil {
		delete(m, replica)
		if len(m) == 0 {
			delete(s.held, key)
			delete(s.known, key)
		}
	}
}

func (s *Store) untrackKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, key)
	delete(s.known, key)
}

// Shutdown ends the store: the holds it made are released as Unhold would
// (a Closing claim whose last holder it was is deleted), its session
// lease is revoked (its registrations vanish), its event streams close,
// and later calls fail with claims.ErrClosed. It does not close the
// client. A second Shutdown does nothing.
func (s *Store) Shutdown() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	held := s.held
	s.held, s.known = nil, nil
	sess := s.sess
	s.mu.Unlock()
	s.leases.reset()

	ctx, cancel := context.WithTimeout(context.Background(), s.set.requestTimeout)
	defer cancel()
	var errs []error
release:
	for key, reps := range held {
		for r := range reps {
			if err := s.unhold(ctx, key, r); err != nil {
				errs = append(errs, s.fail(ctx, "shutdown", err))
				if ctx.Err() != nil {
					break release
				}
			}
		}
	}
	if sess != nil {
		sess.Orphan()
		if _, err := s.cli.Revoke(ctx, sess.Lease()); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			errs = append(errs, s.fail(ctx, "shutdown", err))
		}
	}
	s.cancel()
	s.wg.Wait()
	return errors.Join(errs...)
}

// abandon ends the store as a killed process would: no Unhold, no
// revoke (its session lease is left to expire), its streams closed. It
// returns the session's lease.
func (s *Store) abandon() clientv3.LeaseID {
	s.mu.Lock()
	s.closed = true
	sess := s.sess
	s.held, s.known = nil, nil
	s.mu.Unlock()
	lease := clientv3.NoLease
	if sess != nil {
		sess.Orphan()
		lease = sess.Lease()
	}
	s.cancel()
	s.wg.Wait()
	return lease
}

// invalid is the error of a bad argument the claims checkers do not cover
// (a nil context, New's configuration).
func invalid(op, what string) error {
	return &claims.ArgumentError{Op: op, What: what}
}
