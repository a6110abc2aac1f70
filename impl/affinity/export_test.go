package affinity

// RawKey exposes a key's bytes to the external tests (a claim's key in
// the store is the phase's byte and these).
func RawKey(k Key) string { return k.k }

// HashedKey exposes a key's hashed form (Replicas.LegacyKeys' claim name).
func HashedKey(k Key) Key { h, _ := k.hashed(); return h }
