package claims

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ownDefsMarker opens the part of Claims.tla where the guarantees are said.
const ownDefsMarker = "(* What the guarantees promise"

var tlaIdent = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// tlaBodies splits src into top-level definitions: name -> body.
func tlaBodies(src string) (names []string, bodies map[string]string) {
	bodies = map[string]string{}
	locs := tlaDef.FindAllStringSubmatchIndex(src, -1)
	for i, l := range locs {
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		name := src[l[2]:l[3]]
		names = append(names, name)
		bodies[name] = src[l[1]:end]
	}
	return names, bodies
}

// stripComments removes (* ... *) and \* comments from TLA+ text.
func stripComments(s string) string {
	s = regexp.MustCompile(`(?s)\(\*.*?\*\)`).ReplaceAllString(s, " ")
	return regexp.MustCompile(`\\\*[^\n]*`).ReplaceAllString(s, " ")
}

// ghostDefs are the definitions of the protocol part that write the ghosts
// the guarantees measure with: they are held to the guarantees' rule.
var ghostDefs = []string{"TrackEnded", "TrackLineage", "TrackMoves"}

// bornField is a use of a claim's `born`, which the actions write: no
// guarantee may measure with it (the ghost lineage is the yardstick).
var bornField = regexp.MustCompile(`\.born\b`)

// ownDefsViolations lists where the guarantees of claims (Claims.tla's
// text), the definitions that write its ghosts (TrackEnded, TrackLineage)
// or the witnesses of mc (MCClaims.tla's) use an action, a definition an
// action uses, or a claim's born; only the constant set ClaimStates is
// shared.
func ownDefsViolations(t *testing.T, claims, mc string) []string {
	t.Helper()
	i := strings.Index(claims, ownDefsMarker)
	require.Greater(t, i, 0, "Claims.tla has no %q section", ownDefsMarker)
	pnames, pbodies := tlaBodies(stripComments(claims[:i]))
	forbidden := map[string]bool{}
	for _, n := range pnames {
		forbidden[n] = true
	}
	for _, ok := range []string{"ClaimStates", "Init", "Spec", "View"} {
		delete(forbidden, ok)
	}
	var out []string
	checkBody := func(file, n, body string) {
		body = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(body, " ") // action names as labels are data
		for _, id := range tlaIdent.FindAllString(body, -1) {
			if forbidden[id] && id != n {
				out = append(out, file+": "+n+" uses "+id)
			}
		}
		if bornField.MatchString(body) {
			out = append(out, file+": "+n+" uses born")
		}
	}
	check := func(file, text string) {
		names, bodies := tlaBodies(text)
		for _, n := range names {
			if forbidden[n] {
				continue // a definition of the protocol part itself
			}
			checkBody(file, n, bodies[n])
		}
	}
	for _, n := range ghostDefs {
		body, ok := pbodies[n]
		require.True(t, ok, "Claims.tla does not define %s", n)
		checkBody("Claims.tla", n, body)
	}
	check("Claims.tla", stripComments(claims[i:]))
	mcs := stripComments(mc)
	j := strings.Index(mcs, "NeverResetEvicts ==")
	require.Greater(t, j, 0)
	check("MCClaims.tla", mcs[j:])
	return out
}

// TestPropertiesUseOwnDefinitions: the guarantees of Claims.tla and the
// witnesses of MCClaims.tla are said without any action or any definition
// an action uses: a broken variant replaces one of those and must not move
// its own yardstick. The check has teeth: ClaimCurrent said with the
// actions' Stale is reported.
func TestPropertiesUseOwnDefinitions(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(specDir, "Claims.tla"))
	require.NoError(t, err)
	mc, err := os.ReadFile(filepath.Join(specDir, "MCClaims.tla"))
	require.NoError(t, err)
	require.Empty(t, ownDefsViolations(t, string(b), string(mc)))
	own := "ClaimCurrent(s) == claim[s].st # \"None\" /\\ gen[claim[s].target] = claim[s].gen"
	require.Contains(t, string(b), own)
	broken := strings.Replace(string(b), own, "ClaimCurrent(s) == claim[s].st # \"None\" /\\ ~Stale(claim[s])", 1)
	require.Equal(t, []string{"Claims.tla: ClaimCurrent uses Stale"}, ownDefsViolations(t, broken, string(mc)))
	// born: a lineage measured with the claim's own born is reported, in a
	// guarantee's helper and in the ghost's definition alike.
	lin := "lease[r][s].rev >= lineage[s]"
	require.Contains(t, string(b), lin)
	broken = strings.Replace(string(b), lin, "lease[r][s].rev >= claim[s].born", 1)
	require.Equal(t, []string{"Claims.tla: LeasesOnLineage uses born"}, ownDefsViolations(t, broken, string(mc)))
	track := "THEN claim'[s].rev"
	require.Contains(t, string(b), track)
	broken = strings.Replace(string(b), track, "THEN claim'[s].born", 1)
	require.Equal(t, []string{"Claims.tla: TrackLineage uses born"}, ownDefsViolations(t, broken, string(mc)))
	broken = strings.Replace(string(b), track, "THEN NewClaim(claim'[s].target).rev", 1)
	require.Equal(t, []string{"Claims.tla: TrackLineage uses NewClaim"}, ownDefsViolations(t, broken, string(mc)))
}

// TestGoPropertiesUseOwnFunctions: the Go invariants, properties and
// witnesses, and the functions that write the ghosts (TrackEnded,
// TrackLineage), call no function of the actions (actions.go, bugs.go,
// next.go) and read no claim's Born.
func TestGoPropertiesUseOwnFunctions(t *testing.T) {
	fset := token.NewFileSet()
	forbidden := map[string]bool{}
	for _, f := range []string{"actions.go", "bugs.go", "next.go"} {
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name != "String" {
				forbidden[fd.Name.Name] = true
			}
		}
	}
	require.True(t, forbidden["needsClaim"] && forbidden["Route"])
	for _, f := range []string{"properties.go", "witnesses.go"} {
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		require.Empty(t, goOwnViolations(fset, af, forbidden, nil), f)
	}
	af, err := parser.ParseFile(fset, "next.go", nil, 0)
	require.NoError(t, err)
	ghosts := map[string]bool{"TrackEnded": true, "TrackLineage": true, "TrackMoves": true}
	require.Empty(t, goOwnViolations(fset, af, forbidden, ghosts))
	// The check has teeth: TrackLineage reading Born, or calling newClaim, is reported.
	src, err := os.ReadFile("next.go")
	require.NoError(t, err)
	for _, c := range []struct{ from, to, want string }{
		{"t.Lineage[ss] = nc.Rev", "t.Lineage[ss] = nc.Born", "reads Born"},
		{"t.Lineage[ss] = nc.Rev", "t.Lineage[ss] = newClaim(s, nc.Target).Rev", "calls newClaim"},
	} {
		require.Contains(t, string(src), c.from)
		af, err := parser.ParseFile(fset, "next.go", strings.Replace(string(src), c.from, c.to, 1), 0)
		require.NoError(t, err)
		v := goOwnViolations(fset, af, forbidden, ghosts)
		require.Len(t, v, 1)
		require.Contains(t, v[0], c.want)
	}
}

// goOwnViolations lists the calls of forbidden functions and the reads of
// a Born field in af's functions (only those named in only, when not nil;
// the properties and witnesses are built in init functions).
func goOwnViolations(fset *token.FileSet, af *ast.File, forbidden, only map[string]bool) []string {
	var out []string
	for _, d := range af.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || (only != nil && !only[fd.Name.Name]) {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Born" {
				out = append(out, fmt.Sprintf("%s: %s reads Born", fset.Position(sel.Pos()), fd.Name.Name))
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var name string
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			if forbidden[name] && name != fd.Name.Name {
				out = append(out, fmt.Sprintf("%s: %s calls %s, a function of the actions", fset.Position(call.Pos()), fd.Name.Name, name))
			}
			return true
		})
	}
	return out
}
