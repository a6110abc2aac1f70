// Package testhooks lets the module's own checkers observe what a layer
// does inside one call, where a black-box history cannot see it. Each
// hook is nil in production (one nil check, on cold paths only) and is set
// by a test before it starts the goroutines that use the layer.
package testhooks

import "context"

// StartGaveUp, if set, is called by impl/affinity's Layer.Start each time
// it gives up a lease it took on the session's binding before returning:
// invalidated is true when it invalidated the binding (its worker failed,
// left or restarted: a move), false when it released it (a hard-mode pin
// conflict). ctx is the Start's.
var StartGaveUp func(ctx context.Context, invalidated bool)

// CoreEvent, if set, is called by impl/affinity with every event of its
// core coordinators (under the key's lock: it must not block): the kind,
// the key's first bytes, the attempt and the event's sequence number.
var CoreEvent func(kind, key string, attempt, seq uint64)

// StartRead, if set, is called by impl/affinity's Layer.Start over a
// replica when the Start returns bound to a claim it read from the store
// (it holds the session's reservation and its dispatch there adopts the
// claim), not a cached hit. ctx is the Start's.
var StartRead func(ctx context.Context)
