//go:build race

package claims

const raceEnabled = true
