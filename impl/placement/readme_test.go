package placement_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeRequestIsCompiled: the request in the README's "Using it" is
// serve in example_test.go, word for word (tabs shown as four spaces), so
// the README's example compiles and Example_request runs it.
func TestReadmeRequestIsCompiled(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fn := func(text, what string) string {
		i := strings.Index(text, "func serve(")
		if i < 0 {
			t.Fatalf("%s has no func serve", what)
		}
		j := strings.Index(text[i:], "\n}\n")
		if j < 0 {
			t.Fatalf("%s: func serve does not end", what)
		}
		return text[i : i+j+3]
	}
	want := strings.ReplaceAll(fn(string(src), "example_test.go"), "\t", "    ")
	if got := fn(string(readme), "README.md"); got != want {
		t.Fatalf("the README's request differs from serve in example_test.go:\n%s\nwant:\n%s", got, want)
	}
}
