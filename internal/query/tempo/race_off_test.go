//go:build !race

package tempo

const raceDetector = false
