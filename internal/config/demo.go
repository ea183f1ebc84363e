package config

import "net"

// Demo is `gatehouse serve --demo`: demo data, printed credentials and
// example commands, and the payment sandbox.
type Demo struct {
	Enabled bool `flag:"demo" usage:"seed demo data and print credentials and example commands (serve)" doc:"gatehouse serve seeds demo data and prints credentials and example commands; starts the payment sandbox unless GATEHOUSE_PAYMENT_URL is set"`
	// Receiver is the address of the webhook receiver the demo app calls
	// back (`gatehouse webhook listen`).
	Receiver string `flag:"demo-receiver" default:"127.0.0.1:9099" usage:"with --demo: the loopback address of the webhook receiver the demo app calls back (gatehouse webhook listen) and of its OAuth callback page" doc:"with --demo: the loopback address of the webhook receiver the demo app calls back (gatehouse webhook listen), which also serves the demo's OAuth callback page. Changed, the next start points the demo app there (unless its callback URL was set elsewhere)"`
	// Reset wipes the embedded demo's database before it is seeded.
	Reset bool `flag:"reset" usage:"with --demo on the embedded database: move the database aside (to <data dir>/before-reset/) and seed the demo afresh (refused with Postgres)" doc:"with --demo on the embedded SQLite database: move the database file aside (to before-reset/ in the data dir, replacing an earlier one) before starting, so the demo is seeded afresh (the dev keys and the replay memory in the data dir are kept). Refused with a Postgres GATEHOUSE_DATABASE_URL, and refused while another gatehouse serves from the same data dir (every embedded serve holds a lock on gatehouse.lock there: a second one exits at once, naming the data dir) or listens on GATEHOUSE_ADDR. Set as an environment variable it resets at every start (see [decisions](decisions.md#demo-reset))"`
}

// Validate checks the receiver's address, and that a reset comes with the
// demo.
func (d *Demo) Validate() error {
	if _, _, err := net.SplitHostPort(d.Receiver); err != nil {
		return invalidf(d, &d.Receiver, "%q is not host:port", d.Receiver)
	}
	if d.Reset && !d.Enabled {
		return invalidf(d, &d.Reset, "--%s starts the demo afresh and needs --%s (%s=true)", flagOf(d, &d.Reset), flagOf(d, &d.Enabled), envOf(d, &d.Enabled))
	}
	return nil
}
