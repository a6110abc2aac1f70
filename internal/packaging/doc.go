// Package packaging holds the repository's packaging checks: a router that
// imports only the core (impl/placement), or the router kit built on it,
// pulls no etcd module into its build (packaging_test.go builds such
// consumer modules from scratch and reads their go.sum and build list);
// and each of a core-only, a layer and a router-kit consumer finds in its
// build and go.sum exactly the third-party modules README.md's embedding
// contract names, testify only in test builds (hygiene_test.go).
package packaging
