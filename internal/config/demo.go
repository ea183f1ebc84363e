package config

import (
	"fmt"
	"net"
)

// Demo is `gatehouse serve --demo`: demo data, printed credentials and
// example commands, and the payment sandbox.
type Demo struct {
	Enabled bool `flag:"demo" usage:"seed demo data and print credentials and example commands (serve)" doc:"gatehouse serve seeds demo data and prints credentials and example commands; starts the payment sandbox unless GATEHOUSE_PAYMENT_URL is set"`
	// Receiver is the address of the webhook receiver the demo app calls
	// back (`gatehouse webhook listen`).
	Receiver string `flag:"demo-receiver" default:"127.0.0.1:9099" usage:"with --demo: the loopback address of the webhook receiver the demo app calls back (gatehouse webhook listen)" doc:"with --demo: the loopback address of the webhook receiver the demo app calls back (gatehouse webhook listen)"`
}

// Validate checks the receiver's address.
func (d *Demo) Validate() error {
	if _, _, err := net.SplitHostPort(d.Receiver); err != nil {
		return fmt.Errorf("GATEHOUSE_DEMO_RECEIVER: %q is not host:port", d.Receiver)
	}
	return nil
}
