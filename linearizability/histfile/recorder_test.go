package histfile

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// call is a register's call as a client records it: a write of Write, or a
// read (Write -1).
type call struct {
	Client int
	Write  int
}

func stampCall(in *call, client int) { in.Client = client }

func describeCall(in call) string {
	if in.Write < 0 {
		return fmt.Sprintf("c%d read", in.Client)
	}
	return fmt.Sprintf("c%d write %d", in.Client, in.Write)
}

var callRegister = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		if in := input.(call); in.Write >= 0 {
			return true, in.Write
		}
		return output.(int) == state.(int), state
	},
}

// Clients record every call: a setup on client 0 first, then each
// client's calls in order, each stamped with its client, over an interval
// that does not end before it begins; the history of a real register is
// linearizable; Last amends the last call and Add records a derived one.
func TestClientsRecord(t *testing.T) {
	var mu sync.Mutex
	reg := 0
	do := func(r *Recorder[call, int], in call) int {
		return r.Do(in, func() int {
			mu.Lock()
			defer mu.Unlock()
			if in.Write >= 0 {
				reg = in.Write
			}
			return reg
		})
	}
	before := time.Now()
	clients := NewClients[call, int](3, stampCall)
	assert.False(t, clients.Start().Before(before))
	require.Equal(t, 5, do(clients.Client(0), call{Client: 9, Write: 5}), "the setup's write")
	clients.Go(func(r *Recorder[call, int]) {
		for i := range 20 {
			w := -1
			if i%3 == 0 {
				w = 10*r.ID() + i
			}
			do(r, call{Write: w})
		}
		if r.ID() == 2 {
			last := r.Last()
			last.Output = last.Output.(int) + 1000 // amended: no longer what the register did
			r.Add(porcupine.Operation{ClientId: 7, Input: call{Client: 2, Write: -1}, Output: -1, Call: last.Call, Return: last.Return})
		}
	})
	_, finished := clients.Wait(time.Minute, func() { t.Error("aborted") }, describeCall)
	require.True(t, finished)
	h := clients.History()
	require.Len(t, h, 1+3*20+1)
	assert.Equal(t, call{Client: 0, Write: 5}, h[0].Input, "the setup comes first, stamped")
	for i, op := range h {
		assert.LessOrEqual(t, op.Call, op.Return, i)
		if op.ClientId == 7 {
			continue
		}
		assert.Equal(t, op.ClientId, op.Input.(call).Client, "stamped with its client: %d", i)
		if i > 0 && h[i-1].ClientId == op.ClientId {
			assert.LessOrEqual(t, h[i-1].Return, op.Call, "in the client's order: %d", i)
		}
	}
	assert.Equal(t, 2, h[len(h)-2].ClientId)
	assert.Equal(t, 7, h[len(h)-1].ClientId, "the derived call")
	assert.Greater(t, h[len(h)-2].Output.(int), 999, "the amended call")
	assert.False(t, porcupine.CheckOperations(callRegister, h), "the amended read is not linearizable")
	assert.True(t, porcupine.CheckOperations(callRegister, h[:len(h)-2]))
}

// A run that does not finish within the limit is aborted, and Wait names
// the calls in flight (only those); once abort has ended them, Wait
// reports the bodies finished.
func TestClientsWaitNamesCallsInFlight(t *testing.T) {
	clients := NewClients[call, int](3, stampCall)
	entered, release := make(chan struct{}), make(chan struct{})
	clients.Go(func(r *Recorder[call, int]) {
		if r.ID() != 1 {
			return
		}
		r.Do(call{Write: -1}, func() int {
			close(entered)
			<-release
			return 0
		})
	})
	<-entered
	aborts := 0
	abort := func() { aborts++; close(release) }
	blocked, finished := clients.Wait(time.Millisecond, abort, describeCall)
	assert.False(t, finished)
	assert.Equal(t, []string{"c1 read"}, blocked)
	assert.Equal(t, 1, aborts)
	blocked, finished = clients.Wait(time.Minute, func() { t.Error("aborted twice") }, describeCall)
	assert.True(t, finished)
	assert.Empty(t, blocked)
	assert.Len(t, clients.History(), 1)
}
