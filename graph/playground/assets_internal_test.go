package playground

import (
	"crypto/sha256"
	"encoding/base64"
	"testing"
)

// TestPlaygroundAssetsIntegrity: the vendored files are byte for byte the
// ones whose hashes gqlgen publishes (and the page announces as SRI).
func TestPlaygroundAssetsIntegrity(t *testing.T) {
	for _, a := range []playgroundAsset{graphiqlJS, graphiqlCSS, reactJS, reactDOMJS} {
		got, err := subresourceIntegrity(a.path)
		if err != nil {
			t.Fatal(err)
		}
		if got != a.sri {
			t.Errorf("%s: %s, want %s", a.path, got, a.sri)
		}
	}
}

// subresourceIntegrity computes the SRI value of an embedded file.
func subresourceIntegrity(path string) (string, error) {
	b, err := playgroundFiles.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:]), nil
}
