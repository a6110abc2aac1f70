package apigolden

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite api/*.txt from the packages as they are")

// The command that regenerates the golden files, named in every failure.
const regenerate = "go test ./internal/apigolden -update   (or: make api)"

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAPIGolden fails when the exported API of a public package (every
// package under impl/) differs from its file under api/, or when a file
// names a package that is gone: the public surface changes only with its
// golden file, in the same commit, so a review sees the change.
func TestAPIGolden(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	dir := root(t)
	pkgs, err := Load(dir, Pattern)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("no public package found")
	}
	apiDir := filepath.Join(dir, "api")
	want := map[string]bool{}
	for _, p := range pkgs {
		want[p.File] = true
		path := filepath.Join(apiDir, p.File)
		got := p.Format()
		if *update {
			if err := os.MkdirAll(apiDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			t.Errorf("%s has no golden file api/%s: a new public package? run %s", p.Path, p.File, regenerate)
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(old, got) {
			added, removed := diff(lines(old), lines(got))
			t.Errorf("the exported API of %s changed and api/%s was not updated:\n%s\n"+
				"if the change is intended, run %s and commit api/%s with it\n"+
				"(docs/compatibility.md: removals and changed lines break callers)",
				p.Path, p.File, show(added, removed), regenerate, p.File)
		}
	}
	entries, err := os.ReadDir(apiDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".txt") || want[e.Name()] {
			continue
		}
		if *update {
			if err := os.Remove(filepath.Join(apiDir, e.Name())); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("api/%s names no public package now (removed?); run %s", e.Name(), regenerate)
	}
	if *update {
		t.Logf("wrote %d files under api/", len(pkgs))
	}
}

func lines(b []byte) []string {
	var ls []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			ls = append(ls, l)
		}
	}
	return ls
}

func diff(old, new []string) (added, removed []string) {
	in := func(ls []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range ls {
			m[l] = true
		}
		return m
	}
	o, n := in(old), in(new)
	for _, l := range new {
		if !o[l] {
			added = append(added, l)
		}
	}
	for _, l := range old {
		if !n[l] {
			removed = append(removed, l)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

func show(added, removed []string) string {
	var b strings.Builder
	for _, l := range removed {
		fmt.Fprintf(&b, "  - %s\n", l)
	}
	for _, l := range added {
		fmt.Fprintf(&b, "  + %s\n", l)
	}
	return strings.TrimRight(b.String(), "\n")
}

// TestSurfaceFormat pins the line format on a small package: constants
// with type and value, generics, fields, embedded fields, interfaces,
// variadic and unnamed parameters, promoted methods, unexported names left
// out.
func TestSurfaceFormat(t *testing.T) {
	const src = `package p

import "time"

const D = 2 * time.Second
const F = 0.5
var ErrX error
type Opt func(n int) bool
type Inner struct{ A int }
func (Inner) Get() int { return 0 }
type C[T comparable] struct {
	Inner
	X      T
	hidden int
}
func New[T comparable](x T, opts ...Opt) (*C[T], error) { return nil, nil }
func (c *C[T]) Do(d time.Duration) {}
func (c *C[T]) undo() {}
type S interface{ Stats() int }
type private struct{}
`
	want := []string{
		"pkg example.com/p, const D = 2000000000",
		"pkg example.com/p, const D time.Duration",
		"pkg example.com/p, const F = 0.5",
		"pkg example.com/p, const F untyped float",
		"pkg example.com/p, func New[T comparable](T, ...Opt) (*C[T], error)",
		"pkg example.com/p, method (*C[T]) Do(time.Duration)",
		"pkg example.com/p, method (C[T]) Get() int",
		"pkg example.com/p, method (Inner) Get() int",
		"pkg example.com/p, type C struct, X T",
		"pkg example.com/p, type C struct, embedded Inner",
		"pkg example.com/p, type C[T comparable] struct",
		"pkg example.com/p, type Inner struct",
		"pkg example.com/p, type Inner struct, A int",
		"pkg example.com/p, type Opt func(n int) bool",
		"pkg example.com/p, type S interface { Stats }",
		"pkg example.com/p, type S interface, Stats() int",
		"pkg example.com/p, var ErrX error",
	}
	got := surfaceOf(t, src)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := FileName(Module + "/impl/claims/memstore"); got != "claims.memstore.txt" {
		t.Errorf("FileName: %q", got)
	}
}

// TestSurfaceCatchesBreakingChanges is the golden check's broken variants:
// each edit of a small package that breaks its callers (a removed method, a
// changed signature, a changed constant's value, a removed field, a pointer
// result made a value) must change its surface, and the diff TestAPIGolden
// prints must name the removed line.
func TestSurfaceCatchesBreakingChanges(t *testing.T) {
	const base = `package p
const Max = 2
type T struct{ A int }
func (t *T) Do(n int) error { return nil }
func New() *T { return nil }
`
	want := surfaceOf(t, base)
	for name, edit := range map[string][2]string{
		"method removed":   {"func (t *T) Do(n int) error { return nil }\n", ""},
		"signature":        {"Do(n int) error", "Do(n int64) error"},
		"constant's value": {"const Max = 2", "const Max = 3"},
		"field removed":    {"struct{ A int }", "struct{}"},
		"result by value":  {"func New() *T { return nil }", "func New() T { return T{} }"},
	} {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(base, edit[0], edit[1], 1)
			if src == base {
				t.Fatalf("the edit %q does not apply", edit[0])
			}
			got := surfaceOf(t, src)
			_, removed := diff(want, got)
			if len(removed) == 0 {
				t.Errorf("a breaking edit (%s) left no removed line in the surface:\n%s", name, strings.Join(got, "\n"))
			}
		})
	}
}

// surfaceOf type-checks src as package example.com/p and returns its
// Surface.
func surfaceOf(t *testing.T, src string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("example.com/p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Surface(pkg)
}
