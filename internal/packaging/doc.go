// Package packaging holds the repository's packaging checks: a router that
// imports only the core (impl/placement), or the router kit built on it,
// pulls no etcd module into its build (packaging_test.go builds such
// consumer modules from scratch and reads their go.sum and build list).
package packaging
