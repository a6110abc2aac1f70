package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Dependency hygiene, shown from outside: what a consumer module of the
// core, of the affinity layer and of the router kit finds in its build and
// in its go.sum, against what README.md's "The embedding contract"
// (Dependencies) names. A module that appears here and not there fails
// the test, and so does one the README names that is no longer needed.
//
// go.sum is wider than the build: go mod tidy records the checksums of the
// modules the tests of every package a consumer imports use (so that
// `go test all` can run), though nothing of them is built into the
// consumer. Those are the test-only modules below; the core's tests use
// none, so a core-only consumer's go.sum is empty.

// The third-party modules README.md names.
var (
	// layerBuild: what the layer and the router kit build in: errgroup.
	layerBuild = []string{"golang.org/x/sync"}
	// testOnly: the modules the library's own tests use (testify, its
	// YAML dependency, rapid), in a layer or router-kit consumer's go.sum
	// and never in its build.
	testOnly = []string{"github.com/stretchr/testify", "go.yaml.in/yaml/v3", "pgregory.net/rapid"}
)

// thirdParty returns the sorted modules of a go.sum or a build list other
// than this repository's.
func thirdParty(gosum string, mods []string) (sum, build []string) {
	set := func(xs []string) []string {
		m := map[string]bool{}
		for _, x := range xs {
			if x != "" && !strings.HasPrefix(x, "github.com/placementlab/placement") && x != "example.com/router" {
				m[x] = true
			}
		}
		out := []string{}
		for x := range m {
			out = append(out, x)
		}
		sort.Strings(out)
		return out
	}
	var fromSum []string
	for _, line := range strings.Split(gosum, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			fromSum = append(fromSum, f[0])
		}
	}
	return set(fromSum), set(mods)
}

func union(xs ...[]string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x...)
	}
	sort.Strings(out)
	return out
}

// TestHygiene_CoreConsumer: a router that imports only the core builds in
// no third-party module and has none in its go.sum (testify included).
func TestHygiene_CoreConsumer(t *testing.T) {
	skipShort(t)
	sum, mods := consumer(t, "impl/placement")
	gs, build := thirdParty(sum, mods)
	assert.Empty(t, gs, "a core-only consumer's go.sum")
	assert.Empty(t, build, "a core-only consumer's build")
}

// TestHygiene_LayerConsumer: the affinity layer (and the in-memory claims
// store its tests use) builds in golang.org/x/sync alone; its go.sum adds
// the library's test-only modules.
func TestHygiene_LayerConsumer(t *testing.T) {
	skipShort(t)
	sum, mods := consumer(t, "impl/affinity", "impl/claims", "impl/claims/memstore")
	gs, build := thirdParty(sum, mods)
	assert.Equal(t, layerBuild, build)
	assert.Equal(t, union(layerBuild, testOnly), gs)
}

// TestHygiene_RouterKitConsumer: the router kit builds in golang.org/x/sync
// alone; its go.sum adds the library's test-only modules.
func TestHygiene_RouterKitConsumer(t *testing.T) {
	skipShort(t)
	sum, mods := consumer(t, "impl/affinity", "impl/router", "impl/picker", "impl/httpoutcome",
		"impl/resolver", "impl/policyqueue")
	gs, build := thirdParty(sum, mods)
	assert.Equal(t, layerBuild, build)
	assert.Equal(t, union(layerBuild, testOnly), gs)
}

// TestHygiene_TestifyOnlyInTestBuilds: a consumer whose tests use testify
// (as the repository's consumer/ module does) has it in its test build and
// not in its build; and no public package of the repository builds it in
// but impl/claims/storetest, the store contract whose callers are tests.
func TestHygiene_TestifyOnlyInTestBuilds(t *testing.T) {
	skipShort(t)
	const test = "package main\n\nimport (\n\t\"testing\"\n\n\t\"github.com/stretchr/testify/require\"\n)\n\n" +
		"func TestX(t *testing.T) { require.True(t, true) }\n"
	_, build, testBuild := consumerWith(t, map[string]string{"main_test.go": test}, "impl/placement")
	assert.NotContains(t, build, "github.com/stretchr/testify")
	assert.Contains(t, testBuild, "github.com/stretchr/testify")

	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	imports, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", imports)
	for _, line := range strings.Split(string(imports), "\n") {
		if strings.Contains(line, "/impl/claims/storetest") && !strings.HasPrefix(line, "github.com/placementlab/placement/impl/claims/storetest:") {
			t.Errorf("a non-test package imports storetest (and so testify): %s", line)
		}
	}
	// Every package that builds testify in must be storetest (or testify's own).
	cmd = exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "./impl/...")
	cmd.Dir = root
	deps, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", deps)
	for _, line := range strings.Split(string(deps), "\n") {
		if strings.Contains(line, " github.com/stretchr/testify/") && !strings.HasPrefix(line, "github.com/stretchr/testify/") &&
			!strings.HasPrefix(line, "github.com/placementlab/placement/impl/claims/storetest:") {
			t.Errorf("testify in a non-test build: %s", line)
		}
	}
}

// TestHygiene_RepositoryConsumerModule: the repository's own consumer
// module (consumer/, the embedding contract's tests) lists in its
// committed go.sum exactly testify and what the layer and router kit name.
func TestHygiene_RepositoryConsumerModule(t *testing.T) {
	b, err := os.ReadFile("../../consumer/go.sum")
	require.NoError(t, err)
	gs, _ := thirdParty(string(b), nil)
	assert.Equal(t, union(layerBuild, testOnly), gs)
	mod, err := os.ReadFile("../../consumer/go.mod")
	require.NoError(t, err)
	assert.Contains(t, string(mod), "replace github.com/placementlab/placement => ../")
}
