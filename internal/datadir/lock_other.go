//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package datadir

// Lock is a no-op where flock is not available: nothing guards the data
// directory against a second process there.
func Lock(string) (release func(), err error) { return func() {}, nil }
