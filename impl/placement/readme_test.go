package placement_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeRequestIsCompiled: the request in the README's "Quick start" is
// serve (and its helper leastLoaded) in example_test.go, word for word
// (tabs shown as four spaces), so the README's example compiles and
// Example_request runs it.
func TestReadmeRequestIsCompiled(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fn := func(text, name, what string) string {
		i := strings.Index(text, "func "+name+"(")
		if i < 0 {
			t.Fatalf("%s has no func %s", what, name)
		}
		j := strings.Index(text[i:], "\n}\n")
		if j < 0 {
			t.Fatalf("%s: func %s does not end", what, name)
		}
		return text[i : i+j+3]
	}
	for _, name := range []string{"serve", "leastLoaded"} {
		want := strings.ReplaceAll(fn(string(src), name, "example_test.go"), "\t", "    ")
		if got := fn(string(readme), name, "README.md"); got != want {
			t.Fatalf("the README's %s differs from example_test.go's:\n%s\nwant:\n%s", name, got, want)
		}
	}
}
