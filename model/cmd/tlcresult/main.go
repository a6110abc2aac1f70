// Command tlcresult records what TLC reported for a config as JSON data that
// the Go tests compare the model explorer against (spec/tla/results). With
// -dump it also reads TLC's state dump, parses every state into the Go model
// and records the hash of the whole state set. The recording is
// model/tlcout's, shared with model/claims/cmd/claimsresult.
//
//	go run ./model/cmd/tlcresult -config spec/tla/MCPlacement.cfg \
//	    -tlc-output tlc.out -dump states.dump -o spec/tla/results/MCPlacement.json
package main

import (
	"io"

	"github.com/placementlab/placement/model"
	"github.com/placementlab/placement/model/tlcout"
)

func main() { tlcout.Main("tlcresult", dumpKeys) }

// dumpKeys reads a state dump of the config at cfgPath into the Go model.
func dumpKeys(cfgPath string, dump io.Reader, yield func(string)) error {
	c, err := model.ReadTLCConfig(cfgPath)
	if err != nil {
		return err
	}
	m, err := c.Load()
	if err != nil {
		return err
	}
	return m.ReadDump(dump, func(s model.State) error {
		yield(s.Key())
		return nil
	})
}
