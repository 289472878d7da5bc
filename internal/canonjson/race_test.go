//go:build race

package canonjson

// raceEnabled: the race detector makes sync.Pool drop what it is given
// at random, so a test counting allocations has nothing to count.
const raceEnabled = true
