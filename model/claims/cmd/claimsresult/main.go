// Command claimsresult records what TLC reported for a claims config
// (spec/tla/MCClaims*.cfg) as JSON data that model/claims' tests compare
// the claims explorer against (spec/tla/results), in the format of
// model/cmd/tlcresult (both record with model/tlcout). With -dump it also
// reads TLC's state dump, parses every state into the claims model and
// records the hash of the whole state set (tlcout.StateSetHash over the
// claims model's state keys). spec/tla/tlc.sh runs it for the MCClaims*
// configs.
//
//	go run ./model/claims/cmd/claimsresult -config spec/tla/MCClaims.cfg \
//	    -tlc-output tlc.out -dump states.dump -o spec/tla/results/MCClaims.json
package main

import (
	"io"

	"github.com/placementlab/placement/model/claims"
	"github.com/placementlab/placement/model/tlcout"
)

func main() { tlcout.Main("claimsresult", dumpKeys) }

// dumpKeys reads a state dump of the config at cfgPath into the claims model.
func dumpKeys(cfgPath string, dump io.Reader, yield func(string)) error {
	m, _, err := claims.ReadConfig(cfgPath)
	if err != nil {
		return err
	}
	return m.ReadDump(dump, func(s claims.State) error {
		yield(s.Key())
		return nil
	})
}
