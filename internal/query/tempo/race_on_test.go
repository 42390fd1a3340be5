//go:build race

package tempo

// raceDetector: the race detector makes the long tests too slow to run
// with it; .ci/run runs them without (go test -run '^TestLong').
const raceDetector = true
