//go:build !race

package claims

const raceEnabled = false
