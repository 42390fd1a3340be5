//go:build !race

package main

// raceDetector: see race_on_test.go.
const raceDetector = false
