package apikey

// Test-only access to the counter's state.

// Pending returns how many uses wait to be written.
func (c *Counter) Pending() int64 {
	var n int64
	for _, u := range c.b.Pending() {
		n += u.n
	}
	return n
}
