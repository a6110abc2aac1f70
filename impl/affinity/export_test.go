package affinity

// RawKey exposes a key's bytes to the external tests (a claim's key in
// the store is the phase's byte and these).
func RawKey(k Key) string { return k.k }
