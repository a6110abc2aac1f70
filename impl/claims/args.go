package claims

import "fmt"

// ArgumentError is a Store call with an argument no backend accepts (an
// empty key, worker or replica name, a revision or generation that is not
// positive, a nil propose, a negative rank in a proposal). Backends return
// it before they reach the store: such a call changes nothing.
type ArgumentError struct {
	// Op is the operation: "create-or-get", "get", "hold", "unhold",
	// "close", "quarantine", "resolve", "move", "touch", "register",
	// "deregister", "replica-id", "hold-lineage", or a backend's own
	// (such as "open").
	Op string
	// What says what is wrong ("empty key").
	What string
}

// Error describes e.
func (e *ArgumentError) Error() string {
	return "claims: " + e.Op + ": " + e.What + ": invalid argument"
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// The checks below are the argument rules of the Store interface, one
// checker per operation that takes arguments, so that every backend
// rejects the same calls with the same errors. Each returns nil or an
// *ArgumentError naming the operation and the first bad argument, in
// the order of the parameters.

// CheckCreateOrGet checks CreateOrGet's arguments: a key and a propose
// function.
func CheckCreateOrGet(key string, propose func() (Target, error)) error {
	return check("create-or-get", keyArg(key), arg{propose == nil, "nil propose"})
}

// CheckProposal checks the target a CreateOrGet's propose returned: a
// rank, when it has one, is not negative. (An unknown worker is the
// store's to judge: ErrUnknownWorker.)
func CheckProposal(t Target) error {
	if t.HasRank && t.Rank < 0 {
		return &ArgumentError{Op: "create-or-get", What: fmt.Sprintf("negative rank in proposal %v", t)}
	}
	return nil
}

// CheckGet checks Get's argument: a key.
func CheckGet(key string) error { return check("get", keyArg(key)) }

// CheckHold checks Hold's arguments: a key, a positive revision and a
// replica.
func CheckHold(key string, rev int64, replica string) error {
	return check("hold", keyArg(key), revArg(rev), replicaArg(replica))
}

// CheckUnhold checks Unhold's arguments: a key and a replica.
func CheckUnhold(key, replica string) error {
	return check("unhold", keyArg(key), replicaArg(replica))
}

// CheckClose checks Close's arguments: a key, a positive revision and a
// replica.
func CheckClose(key string, rev int64, replica string) error {
	return check("close", keyArg(key), revArg(rev), replicaArg(replica))
}

// CheckQuarantine checks Quarantine's arguments: a key, a positive
// revision and a positive generation (any attempt id is accepted).
func CheckQuarantine(key string, rev, gen int64) error {
	return check("quarantine", keyArg(key), revArg(rev), genArg(gen))
}

// CheckResolve checks Resolve's arguments: a key and a positive
// generation (any attempt id is accepted).
func CheckResolve(key string, gen int64) error {
	return check("resolve", keyArg(key), genArg(gen))
}

// CheckMove checks Move's arguments: a key, a positive revision and a
// target with a worker and, when it has a rank, a rank that is not
// negative. (An unknown worker is the store's to judge:
// ErrUnknownWorker.)
func CheckMove(key string, rev int64, target Target) error {
	if err := check("move", keyArg(key), revArg(rev), workerArg(target.Worker)); err != nil {
		return err
	}
	if target.HasRank && target.Rank < 0 {
		return &ArgumentError{Op: "move", What: fmt.Sprintf("negative rank in target %v", target)}
	}
	return nil
}

// CheckTouch checks Touch's arguments: a key and a positive revision.
func CheckTouch(key string, rev int64) error {
	return check("touch", keyArg(key), revArg(rev))
}

// CheckRegister checks Register's argument: a worker (any identity is
// accepted).
func CheckRegister(worker string) error { return check("register", workerArg(worker)) }

// CheckDeregister checks Deregister's argument: a worker.
func CheckDeregister(worker string) error { return check("deregister", workerArg(worker)) }

// CheckReplicaID checks ReplicaID's argument: a replica.
func CheckReplicaID(replica string) error { return check("replica-id", replicaArg(replica)) }

// arg is one argument's check: bad, and what to say if so.
type arg struct {
	bad  bool
	what string
}

func keyArg(key string) arg         { return arg{key == "", "empty key"} }
func revArg(rev int64) arg          { return arg{rev <= 0, "revision not positive"} }
func genArg(gen int64) arg          { return arg{gen <= 0, "generation not positive"} }
func replicaArg(replica string) arg { return arg{replica == "", "empty replica"} }
func workerArg(worker string) arg   { return arg{worker == "", "empty worker"} }

// check returns an *ArgumentError for op naming the first bad of args.
func check(op string, args ...arg) error {
	for _, a := range args {
		if a.bad {
			return &ArgumentError{Op: op, What: a.what}
		}
	}
	return nil
}
