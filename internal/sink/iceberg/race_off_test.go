//go:build !race

package iceberg_test

const raceDetector = false
