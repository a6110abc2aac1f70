// Package consumer is a router's view of placement from outside the
// repository's module: its own go.mod requires
// github.com/placementlab/placement through a replace to the repository
// root, so its tests can use only the exported API, as a vendoring router
// would. Each test is named after the line of README.md's "The embedding
// contract" that it holds (TestContract_<Line>), and the anchor router's
// eleven public API contract tests are TestAnchor_<what it checks>.
//
// The package has no non-test code: testify reaches only its test builds.
package consumer
