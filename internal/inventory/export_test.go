package inventory

// SetOnInFlight makes s call fn each time it waits for a record another
// process holds in status 0 (set before use).
func SetOnInFlight(s *Service, fn func(bizNo string)) { s.onInFlight = fn }

// SetOnBatch makes s call fn with the size of each batch of deductions
// before it runs (set before use).
func SetOnBatch(s *Service, fn func(size int)) { s.onBatch = fn }

// Queued is the number of deductions waiting for a batch.
func Queued(s *Service) int {
	n := 0
	for _, c := range s.combiners {
		n += c.Queued()
	}
	return n
}

// SameCombiner tells whether deductions of SKUs a and b meet in one
// combiner (can share a batch).
func SameCombiner(s *Service, a, b int) bool { return s.combinerFor(a) == s.combinerFor(b) }
