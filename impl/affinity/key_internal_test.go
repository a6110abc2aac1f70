package affinity

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// visibleASCII agrees with the byte-by-byte rule on every byte value at
// every position of words and tails.
func TestVisibleASCII(t *testing.T) {
	naive := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x21 || s[i] > 0x7e {
				return false
			}
		}
		return true
	}
	for n := 1; n <= 19; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(c)
				if got, want := visibleASCII(string(b)), naive(string(b)); got != want {
					t.Fatalf("%q: %v, want %v", b, got, want)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, 1+rng.IntN(40))
		for i := range b {
			b[i] = byte(0x1f + rng.IntN(0x62))
		}
		if got, want := visibleASCII(string(b)), naive(string(b)); got != want {
			t.Fatalf("%q: %v, want %v", b, got, want)
		}
	}
}

// A short id's key is its raw form, a long one's the hashed form; the raw
// form is injective over the namespace's field boundaries, never equal to
// a hashed or a sibling key, and its hashed form is the key the same id
// had before the raw form (Replicas.LegacyKeys).
func TestKeyForms(t *testing.T) {
	ns := Namespace{Model: "llama", Tenant: "acme"}
	short, err := ns.Session("0190c3a4-7d1e-7c2b-9a55-3f2b8e1d4c6a")
	if err != nil {
		t.Fatal(err)
	}
	if short.k[0] != kindRaw || len(short.k) > MaxKeyBytes {
		t.Fatalf("a UUID's key is not raw: %q", short.k)
	}
	if h, ok := short.hashed(); !ok || h != ns.derive(kindSession, "0190c3a4-7d1e-7c2b-9a55-3f2b8e1d4c6a") {
		t.Fatalf("the raw key's hashed form is not the old key")
	}
	long, err := ns.Session(strings.Repeat("x", 100))
	if err != nil {
		t.Fatal(err)
	}
	if long.k[0] != kindSession || len(long.k) != keyBytes {
		t.Fatalf("a long id's key is not hashed")
	}
	if h, ok := long.hashed(); !ok || h != long {
		t.Fatal("a hashed key's hashed form is itself")
	}
	// Field boundaries: no two of these share a key.
	cases := []struct {
		ns Namespace
		id string
	}{
		{Namespace{Model: "ab", Group: "", Tenant: "c"}, "d"},
		{Namespace{Model: "a", Group: "b", Tenant: "c"}, "d"},
		{Namespace{Model: "a", Group: "", Tenant: "bc"}, "d"},
		{Namespace{Model: "a", Group: "", Tenant: "b"}, "cd"},
		{Namespace{Model: "", Group: "", Tenant: ""}, "abcd"},
		{Namespace{Model: "", Group: "", Tenant: "\x01a"}, "x"},
		{Namespace{Model: "", Group: "", Tenant: ""}, "\x01ax"[1:]},
		{Namespace{Model: strings.Repeat("m", 200)}, "d"},
		{Namespace{Model: "a"}, strings.Repeat("d", 61)},
		{Namespace{Model: "a"}, strings.Repeat("d", 60)},
	}
	seen := map[Key]int{}
	for i, c := range cases {
		k, err := c.ns.Session(c.id)
		if err != nil {
			t.Fatal(err)
		}
		if j, dup := seen[k]; dup {
			t.Fatalf("cases %d and %d share a key", i, j)
		}
		seen[k] = i
		h, ok := k.hashed()
		if !ok || h != c.ns.derive(kindSession, c.id) {
			t.Fatalf("case %d: the hashed form is not the old key", i)
		}
		g, err := c.ns.SiblingGroup(k)
		if err != nil || !g.Sibling() || g == k {
			t.Fatalf("case %d: sibling group %v, %v", i, g, err)
		}
		if old := c.ns.derive(kindSibling, h.k); g != old {
			t.Fatalf("case %d: the sibling group's key changed", i)
		}
	}
	if _, ok := (Key{k: string([]byte{kindRaw, 9, 'a'})}).hashed(); ok {
		t.Fatal("a malformed raw key has a hashed form")
	}
}

// BenchmarkKey compares the two key forms of the same UUID under the
// benchmarks' namespace: the raw encoding Session uses, and the SHA-256
// of the same fields every id's key was before (Replicas.LegacyKeys' claim
// name); validation included in neither.
func BenchmarkKey(b *testing.B) {
	ns := Namespace{Model: "llama", Tenant: "acme"}
	const id = "0190c3a4-7d1e-7c2b-9a55-3f2b8e1d4c6a"
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := ns.raw(id); !ok {
				b.Fatal("not raw")
			}
		}
	})
	b.Run("hashed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = ns.derive(kindSession, id)
		}
	})
	b.Run("validate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := ValidateSessionID(id); err != nil {
				b.Fatal(err)
			}
		}
	})
}
