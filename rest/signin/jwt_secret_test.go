package signin_test

import (
	"encoding/base64"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"gatehouse/internal/testenv"
)

// TestJWTSecretIsText pins what docs/auth.md promises a verifier: the
// HS256 key is GATEHOUSE_JWT_SECRET's text as bytes, never base64-decoded
// (the test's secret is base64 text, as the guides generate it).
func TestJWTSecretIsText(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		f := auSetup(t, b)
		raw := f.loginToken(t)
		text := f.App.Cfg.Auth.JWTSecretRaw
		decoded, err := base64.StdEncoding.DecodeString(text)
		if err != nil || len(decoded) == 0 {
			t.Fatalf("the test's secret should be base64 text: %v", err)
		}
		parse := func(key []byte) error {
			_, err := jwt.Parse(raw, func(*jwt.Token) (any, error) { return key, nil }, jwt.WithValidMethods([]string{"HS256"}))
			return err
		}
		if err := parse([]byte(text)); err != nil {
			t.Fatalf("the secret's text does not verify the token: %v", err)
		}
		if err := parse(decoded); err == nil {
			t.Fatal("the decoded secret verifies the token too")
		}
	})
}
