package campaign

import (
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/placementlab/placement/linearizability/histfile"
)

// Summary is the report's content (summary.json): the campaign's state
// and its verdict.
type Summary struct {
	*State
	Verdict  string `json:"verdict"` // pass or fail
	Units    int    `json:"units"`
	Runs     int    `json:"runs"`
	Checked  int64  `json:"checked"`
	Failures int    `json:"failures"`
	Written  string `json:"written"`
}

// Summarize returns st's summary.
func Summarize(st *State) Summary {
	s := Summary{State: st, Verdict: Pass, Written: time.Now().UTC().Format(time.RFC3339)}
	s.Units, s.Runs, s.Checked, s.Failures = st.Totals()
	if st.Failed() {
		s.Verdict = Fail
	}
	return s
}

// WriteReport writes summary.json, summary.md and index.html into dir.
func WriteReport(dir string, st *State) error {
	s := Summarize(st)
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(Markdown(s)), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return page.Execute(f, view(s))
}

// Markdown is the summary as summary.md shows it.
func Markdown(s Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Campaign %s: %s\n\n", s.Started.Format("2006-01-02 15:04 UTC"), strings.ToUpper(s.Verdict))
	fmt.Fprintf(&b, "Seed %d, budget %v, ran %v (%s), %d units at most %d at once on %s.\n\n",
		s.Seed, s.Budget, s.Elapsed.Round(time.Second), finished(s.State), s.Units, s.Parallel, orDash(s.Machine))
	fmt.Fprintf(&b, "%d runs checked %d operations, states or inputs; %d failures.\n\n", s.Runs, s.Checked, s.Failures)
	b.WriteString("| checker | kind | status | units | runs | checked | failures | time | last |\n|---|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, c := range s.Stats {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %v | %s |\n", c.Name, c.Kind, c.Status(), c.Units, c.Runs, c.Checked,
			len(c.Failures), c.Took.Round(time.Second), mdCell(c.Last))
	}
	for _, c := range s.Stats {
		for _, f := range c.Failures {
			fmt.Fprintf(&b, "\n## Failure %s (%s)\n\n%s\n\n- reproduce: `%s`\n", f.ID, f.Checker, f.What, f.Repro)
			if f.Promote != "" {
				fmt.Fprintf(&b, "- keep as regression data: `%s`\n", f.Promote)
			}
			for _, l := range [][2]string{{"visualization", f.HTML}, {"history", f.History}, {"trimmed history", f.Trimmed}, {"log", f.Log}} {
				if l[1] != "" {
					fmt.Fprintf(&b, "- %s: [%s](%s)\n", l[0], l[1], l[1])
				}
			}
		}
		for _, e := range c.Errs {
			fmt.Fprintf(&b, "\n- %s could not run: %s\n", c.Name, e)
		}
	}
	for _, c := range s.Stats {
		if len(c.Zoo) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## The bug zoo (%s)\n\n| variant | caught by | time |\n|---|---|---:|\n", c.Last)
		for _, z := range c.Zoo {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", z.Variant, z.By, z.Time)
		}
	}
	for _, c := range s.Stats {
		if zero := zeroCounters(c.Coverage); len(zero) > 0 {
			fmt.Fprintf(&b, "\n%s never reached: %s\n", c.Name, strings.Join(zero, ", "))
		}
	}
	return b.String()
}

func finished(st *State) string {
	if st.Finished {
		return "finished"
	}
	return "stopped: continue it with -resume"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func zeroCounters(cov map[string]int) []string { return histfile.Zero(cov) }

type covItem struct {
	Name string
	N    int
}

type rowView struct {
	*Stats
	Status   string
	Coverage []covItem
	Zero     int
}

type pageView struct {
	Summary
	Rows     []rowView
	List     []Failure
	Zoo      []ZooRow
	ZooLine  string
	Finished string
}

func view(s Summary) pageView {
	v := pageView{Summary: s, Finished: finished(s.State)}
	for _, c := range s.Stats {
		r := rowView{Stats: c, Status: c.Status()}
		for k, n := range c.Coverage {
			r.Coverage = append(r.Coverage, covItem{k, n})
			if n == 0 {
				r.Zero++
			}
		}
		sort.Slice(r.Coverage, func(i, j int) bool { return r.Coverage[i].Name < r.Coverage[j].Name })
		v.Rows = append(v.Rows, r)
		v.List = append(v.List, c.Failures...)
		if len(c.Zoo) > 0 {
			v.Zoo, v.ZooLine = c.Zoo, c.Last
		}
	}
	return v
}

var page = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>placement campaign {{.Started.Format "2006-01-02 15:04"}}: {{.Verdict}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1 .pass{color:#186a3b} h1 .fail{color:#a31515}
table{border-collapse:collapse;margin:.5em 0 1.5em} td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.fail td.status{background:#ffd6d6;font-weight:bold} tr.error td.status{background:#ffe9b3;font-weight:bold}
tr.pass td.status{background:#dcf5e3} tr.skip td.status{background:#eee}
code{background:#f5f5f5;padding:1px 4px;word-break:break-all} details{margin:0} .muted{color:#777}
.failure{border:1px solid #e6a6a6;background:#fff6f6;padding:.6em 1em;margin:.6em 0}
</style></head><body>
<h1>placement campaign: <span class="{{.Verdict}}" id="verdict">{{.Verdict}}</span></h1>
<p>Seed <b>{{.Seed}}</b>, budget {{.Budget}}, ran {{.Elapsed}} ({{.Finished}}), {{.Units}} units, at most {{.Parallel}} at once{{if .Machine}}, on {{.Machine}}{{end}}.
{{.Runs}} runs checked {{.Checked}} operations, states or inputs. <b>{{.Failures}} failures.</b></p>
<h2>Checkers</h2>
<table id="checkers"><tr><th>checker</th><th>kind</th><th>status</th><th>units</th><th>runs</th><th>checked</th><th>failures</th><th>time</th><th>coverage</th><th>last unit</th></tr>
{{range .Rows}}<tr class="{{.Status}}" data-checker="{{.Name}}"><td><b>{{.Name}}</b><br><span class="muted">{{.Doc}}</span></td><td>{{.Kind}}</td><td class="status">{{.Status}}</td>
<td class="n">{{.Units}}</td><td class="n">{{.Runs}}</td><td class="n">{{.Checked}}</td><td class="n">{{len .Failures}}</td><td class="n">{{.Took}}</td>
<td>{{if .Coverage}}<details><summary>{{len .Coverage}} counters{{if .Zero}}, {{.Zero}} never reached{{end}}</summary>{{range .Coverage}}{{.Name}}: {{.N}}<br>{{end}}</details>{{else}}<span class="muted">-</span>{{end}}</td>
<td>{{.Last}}{{range .Errs}}<br><b>could not run:</b> {{.}}{{end}}</td></tr>
{{end}}</table>
<h2>Failures</h2>
{{if not .List}}<p id="no-failures">None.</p>{{end}}
{{range .List}}<div class="failure" id="failure-{{.ID}}" data-checker="{{.Checker}}">
<b>{{.Checker}}</b>, seed {{.Seed}}: {{.What}}<br>
reproduce: <code>{{.Repro}}</code><br>
{{if .Promote}}keep as regression data: <code>{{.Promote}}</code><br>{{end}}
{{if .HTML}}<a class="viz" href="{{.HTML}}">Porcupine visualization</a> · {{end}}{{if .History}}<a class="history" href="{{.History}}">history.json</a> · {{end}}{{if .Trimmed}}<a class="trimmed" href="{{.Trimmed}}">trimmed history</a> · {{end}}{{if .Log}}<a class="log" href="{{.Log}}">log</a>{{end}}
</div>{{end}}
{{if .Zoo}}<h2>The bug zoo: {{.ZooLine}}</h2>
<table id="zoo"><tr><th>variant</th><th>caught by</th><th>time to catch</th></tr>
{{range .Zoo}}<tr class="{{if .Caught}}pass{{else}}fail{{end}}"><td>{{.Variant}}</td><td>{{.By}}</td><td class="n">{{.Time}}</td></tr>
{{end}}</table>{{end}}
<p class="muted">Written {{.Written}}. summary.json and summary.md hold the same.</p>
</body></html>
`))
