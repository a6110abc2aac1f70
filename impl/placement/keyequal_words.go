//go:build amd64 || arm64

package placement

import "unsafe"

// keyEqual reports a == b. Keys of 8 to 32 bytes (most session ids: a UUID
// without dashes, a short prefix and a number) are compared inline as
// overlapping words, so the lookup makes no call to compare them; other
// lengths use ==.
func keyEqual(a, b string) bool {
	n := len(a)
	if n != len(b) || uint(n-8) > 24 {
		return a == b
	}
	pa, pb := unsafe.Pointer(unsafe.StringData(a)), unsafe.Pointer(unsafe.StringData(b))
	if n < 16 {
		return *(*uint64)(pa) == *(*uint64)(pb) &&
			*(*uint64)(unsafe.Add(pa, n-8)) == *(*uint64)(unsafe.Add(pb, n-8))
	}
	return *(*[2]uint64)(pa) == *(*[2]uint64)(pb) &&
		*(*[2]uint64)(unsafe.Add(pa, n-16)) == *(*[2]uint64)(unsafe.Add(pb, n-16))
}
