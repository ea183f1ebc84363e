package secret

import (
	"errors"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// DefaultPasswordCost is the bcrypt cost used in production (about 0.25 s
// per hash on a current core).
const DefaultPasswordCost = 12

// PasswordCost is the bcrypt cost HashPassword uses. Tests lower it (to
// bcrypt.MinCost) before hashing anything, for instance in TestMain; it is
// not safe to change while passwords are being hashed.
var PasswordCost = DefaultPasswordCost

// maxPasswordLen is bcrypt's limit: it ignores every byte past 72.
const maxPasswordLen = 72

var (
	// ErrPasswordTooLong is returned for passwords over 72 bytes, which
	// bcrypt would silently truncate.
	ErrPasswordTooLong = errors.New("secret: password longer than 72 bytes")
	// ErrPasswordEmpty is returned for an empty password.
	ErrPasswordEmpty = errors.New("secret: empty password")
)

// HashPassword returns a salted bcrypt hash of pw at [PasswordCost].
func HashPassword(pw string) (string, error) {
	switch {
	case pw == "":
		return "", ErrPasswordEmpty
	case len(pw) > maxPasswordLen:
		return "", ErrPasswordTooLong
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), PasswordCost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

// CheckPassword reports whether pw matches a hash made by HashPassword.
//
// Pass an empty hash when the user does not exist: the check then runs
// against a dummy hash and takes as long as a real one, so response time
// does not reveal which usernames exist.
func CheckPassword(hash, pw string) bool {
	if hash == "" {
		_ = bcrypt.CompareHashAndPassword(dummyHash(), []byte(pw))
		return false
	}
	// bcrypt compares only the first 72 bytes; such a password can never
	// have been stored, so it cannot match.
	if len(pw) > maxPasswordLen {
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) == nil
}

// dummyHash is made once, at the cost in force on first use.
var dummyHash = sync.OnceValue(func() []byte {
	h, err := bcrypt.GenerateFromPassword([]byte("gatehouse-timing-equaliser"), PasswordCost)
	if err != nil {
		panic("secret: bcrypt: " + err.Error()) // only reachable with an invalid PasswordCost
	}
	return h
})
