// Package benchmarks measures the placement coordinator's hot and cold
// paths and the alternatives a router author would otherwise write. Run
// with `make bench`; compare runs with benchstat. Figures are ratios taken
// within one run: absolute times on shared 2-core machines are noisy.
package benchmarks
