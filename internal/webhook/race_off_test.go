//go:build !race

package webhook_test

// raceDetector: the tests run without the race detector.
const raceDetector = false
