package secret

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// keyEncodings are the spellings accepted for a key: operators paste keys
// from many tools, padded or not, standard or URL-safe alphabet.
var keyEncodings = []*base64.Encoding{
	base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
}

// ParseKey decodes GATEHOUSE_MASTER_KEY: base64 (standard or URL-safe
// alphabet, padding optional) of exactly [KeySize] bytes. Surrounding white
// space is ignored. Errors never contain the value, which is a secret even
// when malformed.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("secret: master key is empty; want base64 of exactly 32 random bytes")
	}
	for _, enc := range keyEncodings {
		key, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("secret: master key decodes to %d bytes; want exactly %d", len(key), KeySize)
		}
		return key, nil
	}
	return nil, errors.New("secret: master key is not valid base64 (standard or URL-safe alphabet); want base64 of exactly 32 random bytes")
}
