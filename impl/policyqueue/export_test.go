package policyqueue

// WaitParked reports whether a Wait has parked on t (it made the ticket's
// wake-up channel): every later change of the ticket wakes it. For tests
// that must know a Wait began before what they do next.
func WaitParked(q *Queue, t Ticket) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.tickets[t]
	return e != nil && e.ready != nil
}
