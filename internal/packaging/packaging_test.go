package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// consumer writes a module importing pkgs (with a replace directive to this
// checkout), tidies and builds it, and returns its go.sum and the modules
// of every package in its build.
func consumer(t *testing.T, pkgs ...string) (gosum string, buildMods []string) {
	t.Helper()
	gosum, buildMods, _ = consumerWith(t, nil, pkgs...)
	return gosum, buildMods
}

// consumerWith is consumer with extra files (a test file, say) in the
// module; it also returns the modules of every package in its test build
// (go list -deps -test).
func consumerWith(t *testing.T, files map[string]string, pkgs ...string) (gosum string, buildMods, testMods []string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	gomod := "module example.com/router\n\ngo 1.26.0\n\nrequire github.com/placementlab/placement v0.0.0\n\n" +
		"replace github.com/placementlab/placement => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		src.WriteString("\t_ \"github.com/placementlab/placement/" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	run("mod", "tidy")
	run("build", "-o", os.DevNull, ".")
	b, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	buildMods = append(buildMods, strings.Fields(run("list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "."))...)
	testMods = append(testMods, strings.Fields(run("list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", "."))...)
	return string(b), buildMods, testMods
}

func etcdIn(gosum string, mods []string) []string {
	var found []string
	for _, line := range strings.Split(gosum, "\n") {
		if strings.HasPrefix(line, "go.etcd.io/") {
			found = append(found, "go.sum: "+line)
		}
	}
	for _, m := range mods {
		if strings.HasPrefix(m, "go.etcd.io/") {
			found = append(found, "build: "+m)
		}
	}
	return found
}

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds consumer modules")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
}

// TestCoreConsumerPullsNoEtcd: a router that imports only the core has no
// etcd module in its go.sum or its build.
func TestCoreConsumerPullsNoEtcd(t *testing.T) {
	skipShort(t)
	sum, mods := consumer(t, "impl/placement")
	require.Empty(t, etcdIn(sum, mods))
	t.Logf("core-only consumer: %d go.sum lines, %d build packages", strings.Count(sum, "\n"), len(mods))
}

// TestRouterKitConsumerPullsNoEtcd: nor does one that imports the affinity
// layer, the router kit and the claims interface with its in-memory store.
func TestRouterKitConsumerPullsNoEtcd(t *testing.T) {
	skipShort(t)
	sum, mods := consumer(t, "impl/placement", "impl/affinity", "impl/router", "impl/picker",
		"impl/httpoutcome", "impl/resolver", "impl/claims")
	require.Empty(t, etcdIn(sum, mods))
}

// TestEtcdConsumerPullsEtcd is the check's witness: a consumer of the etcd
// backend does have etcd in its go.sum, so the two tests above can fail.
func TestEtcdConsumerPullsEtcd(t *testing.T) {
	skipShort(t)
	sum, mods := consumer(t, "impl/claims/etcdstore")
	require.NotEmpty(t, etcdIn(sum, mods))
}
