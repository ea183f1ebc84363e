// Package identity is about the people who sign in: user accounts and
// their passwords (Users), the signed user tokens (JWT, with a
// deny-list for logged-out tokens), and the throttling of failed logins.
//
// users.go (the admin side) declares Users and creates users; this
// package's other files authenticate them and issue and check their tokens.
package identity

import "errors"

// ErrInvalidCredentials is returned by Authenticate for an unknown user, a
// wrong password, or a disabled account alike, so that callers cannot tell
// which usernames exist.
var ErrInvalidCredentials = errors.New("identity: invalid username or password")

// ErrInactive is returned by Active for a user who does not exist (any
// more) or is disabled.
var ErrInactive = errors.New("identity: no such active user")
