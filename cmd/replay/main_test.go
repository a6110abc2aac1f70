package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRun writes the report and the plot, the same bytes twice, and a
// written trace replays to the same table.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "w.jsonl")
	args := []string{"-sessions", "6", "-workers", "5", "-block", "256", "-cache-blocks", "2048", "-out", dir}
	var out1, out2, out3 bytes.Buffer
	require.NoError(t, run(context.Background(), append(args, "-write-trace", trace), &out1))
	md1, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	svg1, err := os.ReadFile(filepath.Join(dir, "replay.svg"))
	require.NoError(t, err)
	require.Contains(t, string(md1), "| placement-soft ")
	require.Contains(t, string(md1), "![hit ratio and p99 TTFT proxy per policy](replay.svg)")
	require.Contains(t, string(svg1), "<svg")

	require.NoError(t, run(context.Background(), append(args, "-write-trace", trace), &out2))
	md2, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	svg2, _ := os.ReadFile(filepath.Join(dir, "replay.svg"))
	require.Equal(t, string(md1), string(md2))
	require.Equal(t, svg1, svg2)

	require.NoError(t, run(context.Background(), append(args, "-trace", trace), &out3))
	table := func(s string) string { return s[:strings.Index(s, "\nwrote")] }
	require.Equal(t, table(out1.String()), table(out3.String()), "the trace replays the generated workload")
}

// TestRunReplicas writes the replicated comparison (replicas.md and
// replicas.svg), the same bytes twice, next to nothing else.
func TestRunReplicas(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-sessions", "6", "-workers", "5", "-block", "256", "-cache-blocks", "2048", "-out", dir, "-replicas", "1,2", "-store-down", "30s"}
	var out1, out2 bytes.Buffer
	require.NoError(t, run(context.Background(), args, &out1))
	md1, err := os.ReadFile(filepath.Join(dir, "replicas.md"))
	require.NoError(t, err)
	svg1, err := os.ReadFile(filepath.Join(dir, "replicas.svg"))
	require.NoError(t, err)
	require.Contains(t, string(md1), "| claims      | 2 |")
	require.Contains(t, string(md1), "![hit ratio, p99 TTFT proxy and split turns per consistency policy and replica count](replicas.svg)")
	require.Contains(t, string(md1), "for 30s (claims)")
	require.Contains(t, string(svg1), "<svg")
	require.NoFileExists(t, filepath.Join(dir, "report.md"))
	require.NoError(t, run(context.Background(), args, &out2))
	md2, _ := os.ReadFile(filepath.Join(dir, "replicas.md"))
	svg2, _ := os.ReadFile(filepath.Join(dir, "replicas.svg"))
	require.Equal(t, string(md1), string(md2))
	require.Equal(t, svg1, svg2)
	require.Contains(t, out1.String(), "| none        | 1 |")
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-mode", "sideways"},
		{"-policies", "nope"},
		{"-workers", "0"},
		{"-cost-slack", "-1s"},
		{"-trace", filepath.Join(dir, "missing.jsonl")},
		{"extra"},
		{"-no-such-flag"},
		{"-replicas", "0"},
		{"-replicas", "two"},
		{"-replicas", "2", "-consistency", "nope"},
		{"-replicas", "2", "-replica-mode", "round-robin"},
	} {
		var out bytes.Buffer
		require.Error(t, run(context.Background(), append(args, "-out", dir), &out), "%v", args)
	}
}
