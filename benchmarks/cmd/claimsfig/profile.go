package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
)

// Rates of the mutex and block profiles while a phase is profiled: every
// contention event, and every blocking event of 10 µs or more on average
// (runtime.SetBlockProfileRate samples by duration).
const (
	mutexFraction = 1
	blockRateNs   = 10_000
)

// profiler takes the CPU, mutex and block profiles of a phase, named
// <dir>/<name>-cpu.pprof, -mutex.pprof and -block.pprof. The mutex and
// block profiles are cumulative in the runtime: the phase's are written
// beside a -base.pprof taken as the phase began (read them with
// `go tool pprof -base X-base.pprof X.pprof`).
type profiler struct {
	dir, name string
	cpu       *os.File
}

// startProfile begins profiling the phase name into dir; "" dir profiles
// nothing (a nil profiler, whose stop does nothing).
func startProfile(dir, name string) (*profiler, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &profiler{dir: dir, name: name}
	runtime.SetMutexProfileFraction(mutexFraction)
	runtime.SetBlockProfileRate(blockRateNs)
	for _, kind := range []string{"mutex", "block"} {
		if err := p.write(kind, "-base"); err != nil {
			return nil, err
		}
	}
	f, err := os.Create(p.path("cpu", ""))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	p.cpu = f
	return p, nil
}

func (p *profiler) path(kind, suffix string) string {
	return filepath.Join(p.dir, fmt.Sprintf("%s-%s%s.pprof", p.name, kind, suffix))
}

func (p *profiler) write(kind, suffix string) error {
	f, err := os.Create(p.path(kind, suffix))
	if err != nil {
		return err
	}
	if err := pprof.Lookup(kind).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stop ends the phase's profiles and writes them.
func (p *profiler) stop() error {
	if p == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.cpu.Close()
	for _, kind := range []string{"mutex", "block"} {
		if werr := p.write(kind, ""); err == nil {
			err = werr
		}
	}
	runtime.SetMutexProfileFraction(0)
	runtime.SetBlockProfileRate(0)
	return err
}
