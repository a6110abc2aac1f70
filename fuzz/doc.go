// Package fuzz holds the `go test -fuzz` targets: the differential run of
// the coordinator against the model from a byte string, and the input
// validation of keys, configs and clock values (no panics, clear errors).
// `make fuzz` runs the campaign (FUZZTIME per target).
package fuzz
