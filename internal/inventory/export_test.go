package inventory

// SetOnInFlight makes s call fn each time it waits for a record another
// process holds in status 0 (set before use).
func SetOnInFlight(s *Service, fn func(bizNo string)) { s.onInFlight = fn }
