//go:build race

package webhook_test

// raceDetector: the tests run under the race detector, whose shadow
// memory is resident beside the heap it covers.
const raceDetector = true
