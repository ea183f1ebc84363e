package secret

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestMain(m *testing.M) {
	// Production cost makes each hash take ~0.25 s; the algorithm is the same.
	PasswordCost = bcrypt.MinCost
	os.Exit(m.Run())
}

func TestDefaultPasswordCost(t *testing.T) {
	t.Parallel()
	if DefaultPasswordCost != 12 {
		t.Fatalf("DefaultPasswordCost = %d, want 12", DefaultPasswordCost)
	}
}

func TestHashAndCheckPassword(t *testing.T) {
	t.Parallel()
	const pw = "correct horse battery staple"
	h, err := HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	if cost, err := bcrypt.Cost([]byte(h)); err != nil || cost != PasswordCost {
		t.Fatalf("hash cost = %d, %v; want %d", cost, err, PasswordCost)
	}
	if strings.Contains(h, pw) {
		t.Fatal("hash contains the password")
	}
	if h2, _ := HashPassword(pw); h2 == h {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, tt := range []struct {
		hash, pw string
		want     bool
	}{
		{h, pw, true},
		{h, pw + " ", false},
		{h, strings.ToUpper(pw), false},
		{h, "", false},
		{"", pw, false}, // unknown user
		{"not a bcrypt hash", pw, false},
		{h[:len(h)-1], pw, false},
	} {
		if got := CheckPassword(tt.hash, tt.pw); got != tt.want {
			t.Errorf("CheckPassword(%.12q…, %q) = %v, want %v", tt.hash, tt.pw, got, tt.want)
		}
	}
}

func TestPasswordLength(t *testing.T) {
	t.Parallel()
	pw72 := strings.Repeat("p", 72)
	h, err := HashPassword(pw72)
	if err != nil {
		t.Fatalf("72-byte password: %v", err)
	}
	if !CheckPassword(h, pw72) {
		t.Fatal("72-byte password does not check")
	}
	if _, err := HashPassword(pw72 + "x"); !errors.Is(err, ErrPasswordTooLong) {
		t.Fatalf("73-byte password: %v, want ErrPasswordTooLong", err)
	}
	// bcrypt alone would accept this: it reads only the first 72 bytes.
	if CheckPassword(h, pw72+"x") {
		t.Fatal("a 73-byte password matched the hash of its first 72 bytes")
	}
	// Multi-byte characters count in bytes, not runes.
	if _, err := HashPassword(strings.Repeat("é", 37)); !errors.Is(err, ErrPasswordTooLong) {
		t.Fatalf("74-byte (37-rune) password: %v, want ErrPasswordTooLong", err)
	}
	if _, err := HashPassword(""); !errors.Is(err, ErrPasswordEmpty) {
		t.Fatalf("empty password: %v, want ErrPasswordEmpty", err)
	}
}
