package claims

import (
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

// ownDefsViolations lists where the guarantees of claims (Claims.tla's
// text) or the witnesses of mc (MCClaims.tla's) use an action or a
// definition an action uses; only the constant set ClaimStates is shared.
func ownDefsViolations(t *testing.T, claims, mc string) []string {
	t.Helper()
	i := strings.Index(claims, ownDefsMarker)
	require.Greater(t, i, 0, "Claims.tla has no %q section", ownDefsMarker)
	pnames, _ := tlaBodies(stripComments(claims[:i]))
	forbidden := map[string]bool{}
	for _, n := range pnames {
		forbidden[n] = true
	}
	for _, ok := range []string{"ClaimStates", "Init", "Spec", "View"} {
		delete(forbidden, ok)
	}
	var out []string
	check := func(file, text string) {
		names, bodies := tlaBodies(text)
		for _, n := range names {
			if forbidden[n] {
				continue // a definition of the protocol part itself
			}
			body := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(bodies[n], " ") // action names as labels are data
			for _, id := range tlaIdent.FindAllString(body, -1) {
				if forbidden[id] {
					out = append(out, file+": "+n+" uses "+id)
				}
			}
		}
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
}

// TestGoPropertiesUseOwnFunctions: the Go invariants, properties and
// witnesses call no function of the actions (actions.go, bugs.go, next.go).
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
		ast.Inspect(af, func(n ast.Node) bool {
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
			require.False(t, forbidden[name], "%s: %s calls %s, a function of the actions", f, fset.Position(call.Pos()), name)
			return true
		})
	}
}
