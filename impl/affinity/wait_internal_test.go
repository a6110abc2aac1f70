package affinity

import (
	"context"
	"testing"
	"time"
)

// waitCtx returns a context that ends after 5 s (or with the test): the
// internal tests' Starts wait no longer under a broken variant of the core
// or the layer (the bug zoo), so a wait that should not happen fails its
// test instead of hanging the package's run. contract_test.go has the
// external tests' copy.
func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}
