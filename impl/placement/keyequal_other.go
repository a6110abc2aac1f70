//go:build !amd64 && !arm64

package placement

// keyEqual reports a == b. (On amd64 and arm64, which load unaligned words
// cheaply, short keys are compared as words; see keyequal_words.go.)
func keyEqual(a, b string) bool { return a == b }
