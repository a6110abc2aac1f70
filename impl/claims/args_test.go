package claims_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/placementlab/placement/impl/claims"
)

// argCase is one checker call and what it must return: an *ArgumentError
// of op saying what, or nil when what is "".
type argCase struct {
	name     string
	call     func() error
	op, what string
}

func argCases() []argCase {
	p := func() (claims.Target, error) { return claims.Target{Worker: "w"}, nil }
	return []argCase{
		{"CreateOrGet ok", func() error { return claims.CheckCreateOrGet("s", p) }, "", ""},
		{"CreateOrGet empty key", func() error { return claims.CheckCreateOrGet("", p) }, "create-or-get", "empty key"},
		{"CreateOrGet nil propose", func() error { return claims.CheckCreateOrGet("s", nil) }, "create-or-get", "nil propose"},
		{"CreateOrGet both bad: the key first", func() error { return claims.CheckCreateOrGet("", nil) }, "create-or-get", "empty key"},
		{"Proposal ok", func() error { return claims.CheckProposal(claims.Target{Worker: "w"}) }, "", ""},
		{"Proposal rank 0", func() error { return claims.CheckProposal(claims.Target{Worker: "w", HasRank: true}) }, "", ""},
		{"Proposal negative rank without HasRank", func() error { return claims.CheckProposal(claims.Target{Worker: "w", Rank: -1}) }, "", ""},
		{"Proposal negative rank", func() error { return claims.CheckProposal(claims.Target{Worker: "w", Rank: -1, HasRank: true}) }, "create-or-get", "negative rank in proposal w/-1"},
		{"Get ok", func() error { return claims.CheckGet("s") }, "", ""},
		{"Get empty key", func() error { return claims.CheckGet("") }, "get", "empty key"},
		{"Hold ok", func() error { return claims.CheckHold("s", 1, "a") }, "", ""},
		{"Hold empty key", func() error { return claims.CheckHold("", 1, "a") }, "hold", "empty key"},
		{"Hold zero rev", func() error { return claims.CheckHold("s", 0, "a") }, "hold", "revision not positive"},
		{"Hold negative rev", func() error { return claims.CheckHold("s", -1, "a") }, "hold", "revision not positive"},
		{"Hold empty replica", func() error { return claims.CheckHold("s", 1, "") }, "hold", "empty replica"},
		{"Hold all bad: the key first", func() error { return claims.CheckHold("", 0, "") }, "hold", "empty key"},
		{"Hold rev and replica bad: the rev first", func() error { return claims.CheckHold("s", 0, "") }, "hold", "revision not positive"},
		{"Unhold ok", func() error { return claims.CheckUnhold("s", "a") }, "", ""},
		{"Unhold empty key", func() error { return claims.CheckUnhold("", "a") }, "unhold", "empty key"},
		{"Unhold empty replica", func() error { return claims.CheckUnhold("s", "") }, "unhold", "empty replica"},
		{"Close ok", func() error { return claims.CheckClose("s", 1, "a") }, "", ""},
		{"Close empty key", func() error { return claims.CheckClose("", 1, "a") }, "close", "empty key"},
		{"Close zero rev", func() error { return claims.CheckClose("s", 0, "a") }, "close", "revision not positive"},
		{"Close empty replica", func() error { return claims.CheckClose("s", 1, "") }, "close", "empty replica"},
		{"Quarantine ok", func() error { return claims.CheckQuarantine("s", 1, 1) }, "", ""},
		{"Quarantine empty key", func() error { return claims.CheckQuarantine("", 1, 1) }, "quarantine", "empty key"},
		{"Quarantine zero rev", func() error { return claims.CheckQuarantine("s", 0, 1) }, "quarantine", "revision not positive"},
		{"Quarantine zero gen", func() error { return claims.CheckQuarantine("s", 1, 0) }, "quarantine", "generation not positive"},
		{"Quarantine negative gen", func() error { return claims.CheckQuarantine("s", 1, -3) }, "quarantine", "generation not positive"},
		{"Resolve ok", func() error { return claims.CheckResolve("s", 1) }, "", ""},
		{"Resolve empty key", func() error { return claims.CheckResolve("", 1) }, "resolve", "empty key"},
		{"Resolve zero gen", func() error { return claims.CheckResolve("s", 0) }, "resolve", "generation not positive"},
		{"Move ok", func() error { return claims.CheckMove("s", 1, claims.Target{Worker: "w"}) }, "", ""},
		{"Move rank 0", func() error { return claims.CheckMove("s", 1, claims.Target{Worker: "w", HasRank: true}) }, "", ""},
		{"Move empty key", func() error { return claims.CheckMove("", 1, claims.Target{Worker: "w"}) }, "move", "empty key"},
		{"Move zero rev", func() error { return claims.CheckMove("s", 0, claims.Target{Worker: "w"}) }, "move", "revision not positive"},
		{"Move empty worker", func() error { return claims.CheckMove("s", 1, claims.Target{}) }, "move", "empty worker"},
		{"Move negative rank", func() error { return claims.CheckMove("s", 1, claims.Target{Worker: "w", Rank: -1, HasRank: true}) }, "move", "negative rank in target w/-1"},
		{"Touch ok", func() error { return claims.CheckTouch("s", 1) }, "", ""},
		{"Touch empty key", func() error { return claims.CheckTouch("", 1) }, "touch", "empty key"},
		{"Touch zero rev", func() error { return claims.CheckTouch("s", 0) }, "touch", "revision not positive"},
		{"Register ok", func() error { return claims.CheckRegister("w") }, "", ""},
		{"Register empty worker", func() error { return claims.CheckRegister("") }, "register", "empty worker"},
		{"Deregister ok", func() error { return claims.CheckDeregister("w") }, "", ""},
		{"Deregister empty worker", func() error { return claims.CheckDeregister("") }, "deregister", "empty worker"},
		{"ReplicaID ok", func() error { return claims.CheckReplicaID("a") }, "", ""},
		{"ReplicaID empty replica", func() error { return claims.CheckReplicaID("") }, "replica-id", "empty replica"},
	}
}

// verify returns what is wrong with c's call, or "".
func verify(c argCase) string {
	err := c.call()
	if c.what == "" {
		if err != nil {
			return fmt.Sprintf("%s: want nil, got %v", c.name, err)
		}
		return ""
	}
	var ae *claims.ArgumentError
	switch {
	case !errors.Is(err, claims.ErrInvalidArgument):
		return fmt.Sprintf("%s: want ErrInvalidArgument, got %v", c.name, err)
	case !errors.As(err, &ae):
		return fmt.Sprintf("%s: want an *ArgumentError, got %T", c.name, err)
	case ae.Op != c.op || ae.What != c.what:
		return fmt.Sprintf("%s: want %s/%s, got %s/%s", c.name, c.op, c.what, ae.Op, ae.What)
	}
	return ""
}

func TestCheckers(t *testing.T) {
	for _, c := range argCases() {
		require.Empty(t, verify(c))
	}
}

// TestCheckersCatchBroken: verify rejects checkers that accept a bad
// argument, name the wrong operation or argument, or reject a good call.
func TestCheckersCatchBroken(t *testing.T) {
	broken := []argCase{
		// Forgets the revision.
		{"Hold without rev check", func() error { return claims.CheckUnhold("s", "a") }, "hold", "revision not positive"},
		// The wrong operation.
		{"Close as hold", func() error { return claims.CheckHold("s", 1, "") }, "close", "empty replica"},
		// The wrong argument first.
		{"Hold replica before rev", func() error { return claims.CheckHold("s", 0, "") }, "hold", "empty replica"},
		// Rejects a good call.
		{"a good call rejected", func() error { return claims.CheckTouch("s", 0) }, "", ""},
		// A plain ErrInvalidArgument without the type.
		{"untyped", func() error { return fmt.Errorf("hold: %w", claims.ErrInvalidArgument) }, "hold", "empty key"},
		// Another error.
		{"moved", func() error { return claims.ErrClaimMoved }, "hold", "empty key"},
	}
	for _, c := range broken {
		require.NotEmpty(t, verify(c), c.name)
	}
}

func TestArgumentError(t *testing.T) {
	ae := &claims.ArgumentError{Op: "hold", What: "empty key"}
	require.Equal(t, "claims: hold: empty key: invalid argument", ae.Error())
	err := fmt.Errorf("wrapped: %w", ae)
	require.ErrorIs(t, err, claims.ErrInvalidArgument)
	require.NotErrorIs(t, err, claims.ErrClaimMoved)
	var got *claims.ArgumentError
	require.ErrorAs(t, err, &got)
	require.Same(t, ae, got)
	require.NotErrorIs(t, claims.ErrInvalidArgument, claims.ErrClaimMoved)
}

// Every backend checks a call's arguments with these before it reaches the
// store; a caller tells a bad argument from other errors with errors.Is or
// errors.As.
func ExampleCheckHold() {
	fmt.Println(claims.CheckHold("session-42", 7, "replica-a"))
	err := claims.CheckHold("session-42", 0, "replica-a")
	fmt.Println(err)
	fmt.Println(errors.Is(err, claims.ErrInvalidArgument))
	var ae *claims.ArgumentError
	if errors.As(err, &ae) {
		fmt.Println(ae.Op, "/", ae.What)
	}
	// Output:
	// <nil>
	// claims: hold: revision not positive: invalid argument
	// true
	// hold / revision not positive
}
