package claimslin_test

import (
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/linearizability/claimslin"
)

// Two replicas race to create a session's claim: the first writer wins,
// and the model refuses a history in which the loser's write also won.
func ExampleNewModel() {
	w0, w1 := claimslin.Tgt{W: 0, R: -1}, claimslin.Tgt{W: 1, R: -1}
	op := func(client int, call, ret int64, in claimslin.Input, out claimslin.Output) porcupine.Operation {
		in.Client = client
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	setup := []porcupine.Operation{
		op(0, 0, 1, claimslin.Input{Op: claimslin.OpRegister, Worker: 0}, claimslin.Output{Gen: 1}),
		op(0, 2, 3, claimslin.Input{Op: claimslin.OpRegister, Worker: 1}, claimslin.Output{Gen: 2}),
	}
	won := claimslin.Claim{Rev: 3, T: w0, Gen: 1, St: claimslin.StBound}
	first := op(1, 4, 8, claimslin.Input{Op: claimslin.OpCreateOrGet, Target: w0}, claimslin.Output{Has: true, Claim: won, Created: true})
	lost := op(2, 5, 9, claimslin.Input{Op: claimslin.OpCreateOrGet, Target: w1}, claimslin.Output{Has: true, Claim: won})
	alsoWon := op(2, 5, 9, claimslin.Input{Op: claimslin.OpCreateOrGet, Target: w1},
		claimslin.Output{Has: true, Claim: claimslin.Claim{Rev: 4, T: w1, Gen: 2, St: claimslin.StBound}, Created: true})
	m := claimslin.NewModel(claimslin.Params{})
	fmt.Println(porcupine.CheckOperations(m, append(setup, first, lost)))
	fmt.Println(porcupine.CheckOperations(m, append(setup, first, alsoWon)))
	// Output:
	// true
	// false
}

// A replica routed a session under claim revision 5 after it had
// processed the Delete of that revision: the routing window had closed,
// and CheckGuarantees reports guarantee 1 broken.
func ExampleCheckGuarantees() {
	w0 := claimslin.Tgt{W: 0, R: -1}
	c5 := claimslin.Claim{Rev: 5, T: w0, Gen: 1, St: claimslin.StBound}
	store := []porcupine.Operation{{ClientId: 0, Call: 10, Return: 20,
		Input:  claimslin.Input{Op: claimslin.OpCreateOrGet, Key: 0, Target: w0},
		Output: claimslin.Output{Has: true, Claim: c5, Created: true}}}
	del := claims.Event{Kind: claims.Delete, Key: "s0", Rev: 5}
	processed := []claimslin.Processed{{Replica: 1, Event: del, Delivered: 40, By: 45}}
	inside := claimslin.Route{Replica: 1, Key: 0, Target: w0, Rev: 5, Call: 30, Return: 35}
	after := claimslin.Route{Replica: 1, Key: 0, Target: w0, Rev: 5, Call: 50, Return: 55}
	delivered := []claimslin.Received{{At: 40, Event: del}}
	fmt.Println(len(claimslin.CheckGuarantees(store, delivered, []claimslin.Route{inside}, processed)))
	for _, v := range claimslin.CheckGuarantees(store, delivered, []claimslin.Route{after}, processed) {
		fmt.Println(v.Guarantee)
	}
	// Output:
	// 0
	// 1
}

// A routing run: replica Coordinators over one memstore, its store
// history and each replica's routes recorded for the checks.
func ExampleExecuteRoutes() {
	plan := claimslin.DrawRoutingPlan(1, 20, claimslin.BackendMem)
	run, err := claimslin.ExecuteRoutes(plan)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(plan.Replicas, "replicas,", plan.Lanes, "lanes each")
	fmt.Println(len(run.Routes) > 0, len(run.History) > 0)
	// Output:
	// 3 replicas, 2 lanes each
	// true true
}
