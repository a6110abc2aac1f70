// Package replicaetcd holds impl/replica's tests on the embedded etcd
// server (its tests; the package has no API). They live apart from the
// replica's own tests so that a module importing impl/replica (the
// affinity layer and the router kit over replicas) lists no etcd module
// in its go.sum: go mod tidy records the modules the tests of its
// dependencies import.
package replicaetcd
