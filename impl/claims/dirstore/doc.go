// Package dirstore is the shared-directory backend of impl/claims, for
// single-host deployments: several router processes on one host share
// their claims through one directory (Linux only; standard library only).
//
// Layout of the directory (every name of a key, worker or replica is
// encoded so that any string is a valid file name):
//
//	lock            flock'd exclusively around every operation: the store's one lock
//	rev             the store's revision counter (every claim or membership write increments it)
//	replicas        the ReplicaID counter
//	claims/<key>    a key's current claim (JSON), with its idle deadline
//	holds/<key>/<replica>@<session>   a hold; it belongs to the claim's lineage
//	members/<worker>  a registration (JSON), naming its session
//	sessions/<id>   a handle's liveness file, flock'd by it while it lives
//	journal/<first rev>.log   the write journal: one JSON record per revision
//
// Writes happen under the lock, each as a temporary file renamed into
// place, so readers never see a partial file and the store is
// linearizable. A handle is one store session: its liveness file is
// flock'd for as long as the handle (its process) lives, so when a process
// dies, even by SIGKILL, the kernel drops the lock and the next operation
// or sweep of any other handle sees the session dead and removes its holds
// and registrations (completing a deferred close whose last holder it
// was).
//
// Events come from the journal: every revision appends one record (the
// revision that ended, if any, or the membership change), so a stream
// reads every Delete in revision order and detects any loss: a gap in the
// revisions (a writer that crashed between its steps, a compacted journal
// segment it had not read, a corrupt record) is a Reset. An inotify watch
// on the journal directory wakes the reader; a periodic poll covers a
// missed wake-up (an inotify queue overflow loses only wake-ups, never
// records, so it needs no Reset), and a periodic rescan compares the
// claims directory with the state the journal implies: any difference the
// journal missed is a Reset.
//
// Idle expiry: each claim file carries its deadline (IdleTTL after its
// last write or Touch); operations apply it lazily to the claims they
// read, and each handle's background sweep deletes expired claims and
// cleans up dead sessions.
//
// Durability is that of process crashes, not of host crashes: nothing is
// fsync'd (a host crash ends every replica on it anyway).
package dirstore
