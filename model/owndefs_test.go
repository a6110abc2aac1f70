package model

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// An override (`Name <- Variant`) replaces a definition everywhere,
// properties included, and a bug in a helper moves everything written with
// it. So the properties, the ghosts (the conjuncts of Spec's next-state
// relation besides Next, and the Go model's Track) and every definition
// they use, transitively, must stay clear of the actions, the definitions a
// variant replaces, and everything those use. The tests below check it on
// both sides: TestPropertiesUseOwnDefinitions on Placement.tla,
// TestGoPropertiesUseOwnFunctions on the Go model's source.

// tlaShared are the definitions both sides may use, and why.
var tlaShared = map[string]string{
	"vars":     "the tuple of the protocol's variables (fairness subscripts and allvars)",
	"Max":      "a pure function of numbers",
	"MaxDelay": "an expression over constants (the clock's range), no variable",
}

// tlaGhostVars are the ghost variables no action may read.
var tlaGhostVars = []string{"since", "arrivals", "step"}

type tlaModule struct {
	defs map[string][]string // definition -> the definitions its body names
	body map[string]string   // definition -> its body, comments and strings removed
}

var (
	tlaComment  = regexp.MustCompile(`(?s)\(\*.*?\*\)`)
	tlaLineCmt  = regexp.MustCompile(`\\\*[^\n]*`)
	tlaString   = regexp.MustCompile(`"[^"\n]*"`)
	tlaDefHead  = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*)\s*(?:\(([^)]*)\))?\s*==(.*)$`)
	tlaEndOfDef = regexp.MustCompile(`^(?:-{4,}|={4,}|EXTENDS\b|CONSTANTS?\b|VARIABLES?\b|ASSUME\b|RECURSIVE\b)`)
	tlaIdent    = regexp.MustCompile(`[A-Za-z][A-Za-z0-9_]*`)
)

// parseTLA splits module texts into their top-level definitions and the
// top-level names each body uses (record fields, operators such as \in
// and bound variables are not definitions, so they drop out).
func parseTLA(srcs ...string) *tlaModule {
	mod := &tlaModule{defs: map[string][]string{}, body: map[string]string{}}
	for _, src := range srcs {
		src = tlaComment.ReplaceAllStringFunc(src, func(c string) string {
			return strings.Repeat("\n", strings.Count(c, "\n")) // keep the lines
		})
		src = tlaLineCmt.ReplaceAllString(src, "")
		src = tlaString.ReplaceAllString(src, `""`)
		cur := ""
		for _, line := range strings.Split(src, "\n") {
			if m := tlaDefHead.FindStringSubmatch(line); m != nil {
				cur = m[1]
				mod.body[cur] = m[3] + "\n"
				continue
			}
			if tlaEndOfDef.MatchString(line) {
				cur = ""
				continue
			}
			if cur != "" {
				mod.body[cur] += line + "\n"
			}
		}
	}
	for name, body := range mod.body {
		seen := map[string]bool{}
		for _, loc := range tlaIdent.FindAllStringIndex(body, -1) {
			id := body[loc[0]:loc[1]]
			if loc[0] > 0 && strings.ContainsRune(`.\`, rune(body[loc[0]-1])) {
				continue // a record field (e.step, !.st) or an operator (\in, \o)
			}
			for _, p := range []string{"WF_", "SF_"} {
				id = strings.TrimPrefix(id, p) // WF_vars(A) names vars
			}
			if _, ok := mod.body[id]; ok && !seen[id] {
				seen[id] = true
				mod.defs[name] = append(mod.defs[name], id)
			}
		}
	}
	return mod
}

// closure returns every definition reachable from roots, each with the
// definition it was reached from ("" for a root).
func closure(edges map[string][]string, roots []string) map[string]string {
	from := map[string]string{}
	var queue []string
	for _, r := range roots {
		if _, ok := from[r]; !ok {
			from[r] = ""
			queue = append(queue, r)
		}
	}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, e := range edges[d] {
			if _, ok := from[e]; !ok {
				from[e] = d
				queue = append(queue, e)
			}
		}
	}
	return from
}

// path renders how def was reached in a closure: root -> ... -> def.
// reachedActions returns what root reaches in edges (for path) and,
// sorted, the definitions among them that the actions reach (actions, a
// closure) and that are not shared.
func reachedActions(edges map[string][]string, root string, actions map[string]string, shared map[string]string) (map[string]string, []string) {
	reach := closure(edges, []string{root})
	var bad []string
	for d := range reach {
		if _, isAction := actions[d]; isAction && shared[d] == "" {
			bad = append(bad, d)
		}
	}
	sort.Strings(bad)
	return reach, bad
}

func path(from map[string]string, def string) string {
	p := []string{def}
	for d := from[def]; d != ""; d = from[d] {
		p = append([]string{d}, p...)
	}
	return strings.Join(p, " -> ")
}

// tlaGhosts are the conjuncts of Spec's next-state relation besides Next.
func tlaGhosts(mod *tlaModule) []string {
	m := regexp.MustCompile(`\[\]\[([^\]]*)\]_`).FindStringSubmatch(mod.body["Spec"])
	if m == nil {
		return nil
	}
	var out []string
	for _, id := range tlaIdent.FindAllString(m[1], -1) {
		if _, ok := mod.body[id]; ok && id != "Next" {
			out = append(out, id)
		}
	}
	return out
}

// tlaOwnDefinitionProblems lists, for the spec text src (and the
// model-checking module mc, whose variants are actions too), every
// property or ghost that reaches an action or a definition actions or
// variants use, and every action or variant that reads a ghost variable.
func tlaOwnDefinitionProblems(src, mc string) []string {
	mod := parseTLA(src)
	var out []string
	actionRoots := append([]string(nil), ActionNames[:]...)
	for _, n := range VariantNames() {
		actionRoots = append(actionRoots, variants[n].replaces)
	}
	for _, r := range actionRoots {
		if _, ok := mod.body[r]; !ok {
			out = append(out, fmt.Sprintf("Placement.tla has no definition of %s (an action or a variant's target)", r))
		}
	}
	actions := closure(mod.defs, actionRoots)
	ghosts := tlaGhosts(mod)
	if len(ghosts) == 0 {
		out = append(out, "Spec's next-state relation has no ghost conjunct besides Next")
	}
	var roots []string
	for _, n := range PropertyNames() {
		if !strings.HasPrefix(n, "Never") { // witnesses only show reachability
			roots = append(roots, n)
		}
	}
	for _, root := range append(roots, ghosts...) {
		if _, ok := mod.body[root]; !ok {
			out = append(out, fmt.Sprintf("Placement.tla has no definition of %s", root))
			continue
		}
		reach, bad := reachedActions(mod.defs, root, actions, tlaShared)
		for _, d := range bad {
			out = append(out, fmt.Sprintf("%s reaches %s, which an action or a variant uses (%s; used as %s)",
				root, d, path(reach, d), path(actions, d)))
		}
	}
	// No action, and no variant, reads a ghost.
	all := parseTLA(src, mc)
	readers := append([]string(nil), actionRoots...)
	for n := range all.body {
		if strings.HasPrefix(n, "Bug") {
			readers = append(readers, n)
		}
	}
	sort.Strings(readers)
	acts := closure(all.defs, readers)
	var names []string
	for d := range acts {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		for _, g := range tlaGhostVars {
			if regexp.MustCompile(`(^|[^.\w])` + g + `\b`).MatchString(all.body[d]) {
				out = append(out, fmt.Sprintf("%s reads the ghost %s (%s)", d, g, path(acts, d)))
			}
		}
	}
	return out
}

func readSpec(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(specDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPropertiesUseOwnDefinitions: in Placement.tla, no invariant or
// property, no ghost (TrackSince, TrackArrivals), and nothing they use,
// transitively, is an action, a definition a variant replaces, or anything
// those use (but for the allow-listed tlaShared); and no action or variant
// reads a ghost variable.
func TestPropertiesUseOwnDefinitions(t *testing.T) {
	src, mc := readSpec(t, "Placement.tla"), readSpec(t, "MCPlacement.tla")
	mod := parseTLA(src)
	if g := strings.Join(tlaGhosts(mod), " "); g != "TrackSince TrackArrivals" {
		t.Errorf("Spec's ghosts are %q; this test expects TrackSince and TrackArrivals", g)
	}
	for _, problem := range tlaOwnDefinitionProblems(src, mc) {
		t.Error(problem)
	}
	// The check must be able to fail. Broken copies of the spec: a property
	// written with the action it judges, one written with Room, a ghost
	// written with an action's helper (directly, and through a helper of
	// its own), a property definition that uses an action's helper (reached
	// only transitively by the properties), and an action that reads a
	// ghost.
	for _, c := range []struct{ old, new, want string }{
		{"BoundOnlyIfAccepted ==\n",
			"BoundOnlyIfAccepted ==\n    [][\\E r \\in Requests : Complete(r, \"Accepted\")]_vars /\\\n",
			"BoundOnlyIfAccepted reaches Complete"},
		{"WithinCapacity == PlacesTaken(Keys) <= Capacity",
			"WithinCapacity == \\A k \\in Keys : Room(k)",
			"WithinCapacity reaches Room"},
		{"                             ELSE PhaseStart(k)]",
			"                             ELSE Began(table[k])]",
			"TrackSince reaches Began"},
		{"WaitsOn(q, k) == q.pc = \"Waiting\" /\\ q.key = k",
			"WaitsOn(q, k) == q.pc = \"Waiting\" /\\ q.key = k /\\ Initializing(table[k])",
			"TrackArrivals reaches Initializing, which an action or a variant uses (TrackArrivals -> WaitsOn -> Initializing;"},
		{"IsLive(e) == e.st = \"Bound\" /\\ gen[e.target] = e.tgen /\\ ~(e.leases = 0 /\\ e.deadline <= now)",
			"IsLive(e) == LiveBound(e)",
			"LeasesOnlyOnLiveBindings reaches LiveBound, which an action or a variant uses (LeasesOnlyOnLiveBindings -> IsLive -> LiveBound;"},
		{"HoldsReservation(r) ==\n    LET e == table[req[r].key] IN e.st = \"Reserved\" /\\ e.holder = r",
			"HoldsReservation(r) ==\n    LET e == table[req[r].key] IN e.st = \"Reserved\" /\\ e.holder = r /\\ since[req[r].key] > 0",
			"HoldsReservation reads the ghost since"},
	} {
		if !strings.Contains(src, c.old) {
			t.Fatalf("the broken copy cannot be made: Placement.tla no longer has %q", c.old)
		}
		got := strings.Join(tlaOwnDefinitionProblems(strings.Replace(src, c.old, c.new, 1), mc), "\n")
		if !strings.Contains(got, c.want) {
			t.Errorf("the check missed %q in a broken spec; it reported:\n%s", c.want, got)
		}
	}
}

// goShared are the functions both the model's actions and its properties
// or ghosts may call, and why.
var goShared = map[string]string{
	"Model.MaxDelay": "the config's constant MaxDelay (the clock's range), no state",
}

// goSource is the Go model's non-test source, by file name.
func goSource(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
	}
	return out
}

// goCallGraph parses the model's source and returns, for every function
// ("name") and method ("Recv.name"), the functions and methods it names,
// and an "ops.Field" node for every overridable definition (an ops field),
// linked to the functions New and the variants assign to it. A selector
// is resolved by name: a call x.M() names every method M, so the graph
// over-approximates (it may report a false sharing, never miss one).
func goCallGraph(src map[string]string) (map[string][]string, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	names := make([]string, 0, len(src))
	for n := range src {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, src[n], 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	funcs := map[string]*ast.FuncDecl{}
	methods := map[string][]string{} // method name -> "Recv.name" keys
	fields := map[string]bool{}      // every struct field name
	opsFields := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				key := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) > 0 {
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						key = id.Name + "." + d.Name.Name
						methods[d.Name.Name] = append(methods[d.Name.Name], key)
					}
				}
				funcs[key] = d
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fl := range st.Fields.List {
						for _, n := range fl.Names {
							fields[n.Name] = true
							if ts.Name.Name == "ops" {
								opsFields[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	isOps := func(x ast.Expr) bool {
		s, ok := x.(*ast.SelectorExpr)
		return ok && s.Sel.Name == "ops"
	}
	refs := func(n ast.Node) []string {
		var out []string
		sels := map[*ast.Ident]bool{}
		called := map[*ast.SelectorExpr]bool{}
		ast.Inspect(n, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				if s, ok := x.Fun.(*ast.SelectorExpr); ok {
					called[s] = true
				}
			case *ast.SelectorExpr:
				sels[x.Sel] = true
				switch {
				case isOps(x.X) && opsFields[x.Sel.Name]:
					out = append(out, "ops."+x.Sel.Name)
				case called[x] || !fields[x.Sel.Name]:
					out = append(out, methods[x.Sel.Name]...)
				}
			case *ast.Ident:
				if d, ok := funcs[x.Name]; ok && !sels[x] && d.Recv == nil {
					out = append(out, x.Name)
				}
			}
			return true
		})
		return out
	}
	edges := map[string][]string{}
	for key, d := range funcs {
		if d.Body != nil {
			edges[key] = refs(d.Body)
		}
	}
	// ops.Field -> what New and the variants assign to it.
	for n := range opsFields {
		edges["ops."+n] = nil // every overridable definition is a node
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				if id, ok := x.Type.(*ast.Ident); ok && id.Name == "ops" {
					for _, el := range x.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok {
								edges["ops."+k.Name] = append(edges["ops."+k.Name], refs(kv.Value)...)
							}
						}
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range x.Lhs {
					s, ok := lhs.(*ast.SelectorExpr)
					if !ok || !opsFields[s.Sel.Name] || i >= len(x.Rhs) {
						continue
					}
					if id, ok := s.X.(*ast.Ident); ok && id.Name == "o" {
						edges["ops."+s.Sel.Name] = append(edges["ops."+s.Sel.Name], refs(x.Rhs[i])...)
					}
				}
			}
			return true
		})
	}
	return edges, nil
}

// funcName is the model's name ("name" or "Recv.name") of a function value.
func funcName(f any) string {
	n := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	n = n[strings.LastIndex(n, "/")+1:]
	n = strings.TrimPrefix(n, "model.")
	n = strings.TrimSuffix(n, "-fm")
	return strings.NewReplacer("(*", "", ")", "").Replace(n)
}

// goPropertyRoots are the functions the properties are registered with,
// and the ghosts' Track.
func goPropertyRoots() (map[string]string, []string) {
	roots := map[string]string{"Model.Track": "the ghosts Since and Arrivals"}
	var bad []string
	add := func(prop string, f any) {
		n := funcName(f)
		if strings.Contains(n, ".func") || strings.Contains(n, "glob.") {
			bad = append(bad, fmt.Sprintf("%s is registered with an anonymous function (%s); name it so the check can follow it", prop, n))
			return
		}
		roots[n] = prop
	}
	for n, p := range Invariants {
		add(n, p.Holds)
	}
	for n, p := range ActionProperties {
		add(n, p.Holds)
	}
	for n, p := range LivenessProperties {
		if p.OnKey != nil {
			add(n, p.OnKey)
		}
	}
	sort.Strings(bad)
	return roots, bad
}

// goOwnFunctionProblems lists every property function or ghost that reaches,
// in the source src, an action, an overridable definition, or a function
// those use.
func goOwnFunctionProblems(src map[string]string) ([]string, error) {
	edges, err := goCallGraph(src)
	if err != nil {
		return nil, err
	}
	var actionRoots []string
	for _, a := range ActionNames {
		actionRoots = append(actionRoots, "Model."+a)
	}
	for n := range edges {
		if strings.HasPrefix(n, "ops.") {
			actionRoots = append(actionRoots, n)
		}
	}
	sort.Strings(actionRoots)
	actions := closure(edges, actionRoots)
	roots, out := goPropertyRoots()
	var keys []string
	for r := range roots {
		keys = append(keys, r)
	}
	sort.Strings(keys)
	for _, r := range keys {
		if _, ok := edges[r]; !ok {
			out = append(out, fmt.Sprintf("%s (%s) has no definition in the model's source", r, roots[r]))
			continue
		}
		reach, bad := reachedActions(edges, r, actions, goShared)
		for _, d := range bad {
			out = append(out, fmt.Sprintf("%s (%s) reaches %s, which an action uses (%s; used as %s)",
				r, roots[r], d, path(reach, d), path(actions, d)))
		}
	}
	return out, nil
}

// TestGoPropertiesUseOwnFunctions: in the Go model, no property function,
// no ghost (Track) and nothing they call, transitively, is an action, an
// overridable definition (an ops field), or a function those call (but for
// the allow-listed goShared).
func TestGoPropertiesUseOwnFunctions(t *testing.T) {
	src := goSource(t)
	problems, err := goOwnFunctionProblems(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	// The check must be able to fail: broken copies of the source where the
	// ghost uses an action's helper (directly, and through a helper of its
	// own), a property definition uses one (so every property using it
	// reaches it), and a property calls Room.
	for _, c := range []struct{ file, old, new, want string }{
		{"next.go", "since[k] = phaseStart(s, k)", "since[k] = Began(s, &s.Table[k])",
			"Model.Track (the ghosts Since and Arrivals) reaches Began"},
		{"next.go", "func waitsOn(q Req, k int) bool { return q.Pc == PcWaiting && q.Key == k }",
			"func waitsOn(q Req, k int) bool { return q.Pc == PcWaiting && q.Key == k && k != None && reqAt(q.Pc, k, 0) == q }",
			"Model.Track (the ghosts Since and Arrivals) reaches reqAt, which an action uses (Model.Track -> arrivalsAfter -> waitsOn -> reqAt;"},
		{"properties.go", "func inFlight(e *Entry) bool { return e.St == Dispatching || e.St == Quarantined }",
			"func inFlight(e *Entry) bool { return Initializing(e) && e.St == Dispatching || e.St == Quarantined }",
			"unsettledStaysVisible (UnsettledStaysVisible) reaches Initializing"},
		{"properties.go", "return m.placesTaken(s, l.K) >= m.Cfg.Capacity", "return !m.Room(s, l.K)",
			"refusedOnlyWhenFull (RefusedOnlyWhenFull) reaches Model.Room"},
	} {
		if !strings.Contains(src[c.file], c.old) {
			t.Fatalf("the broken copy cannot be made: %s no longer has %q", c.file, c.old)
		}
		broken := map[string]string{}
		for k, v := range src {
			broken[k] = v
		}
		broken[c.file] = strings.Replace(src[c.file], c.old, c.new, 1)
		got, err := goOwnFunctionProblems(broken)
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.Join(got, "\n"); !strings.Contains(s, c.want) {
			t.Errorf("the check missed %q in a broken copy of %s; it reported:\n%s", c.want, c.file, s)
		}
	}
}
