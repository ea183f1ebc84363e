package secret

import (
	"bytes"
	"errors"
	"testing"
)

func testKey(fill byte) []byte { return bytes.Repeat([]byte{fill}, KeySize) }

func mustSealer(t testing.TB, key []byte) *Sealer {
	t.Helper()
	s, err := NewSealer(key)
	if err != nil {
		t.Fatalf("NewSealer: %v", err)
	}
	return s
}

func TestNewSealerKeySize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := NewSealer(make([]byte, n)); err == nil {
			t.Errorf("NewSealer with a %d-byte key: no error", n)
		}
	}
	if _, err := NewSealer(make([]byte, KeySize)); err != nil {
		t.Errorf("NewSealer with a %d-byte key: %v", KeySize, err)
	}
}

func TestSealRoundTrip(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(1))
	for _, pt := range [][]byte{nil, {}, []byte("x"), []byte("app-secret-0123456789"), bytes.Repeat([]byte{0xAB}, 1<<20)} {
		sealed, err := s.Seal(pt)
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		if len(sealed) != overhead+len(pt) || sealed[0] != version1 {
			t.Fatalf("sealed %d bytes: length %d, version %d; want %d and %d", len(pt), len(sealed), sealed[0], overhead+len(pt), version1)
		}
		if len(pt) > 8 && bytes.Contains(sealed, pt[:8]) {
			t.Fatal("sealed value contains the plaintext")
		}
		got, err := s.Open(sealed)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("Open returned %d bytes, want the %d sealed", len(got), len(pt))
		}
	}
}

func TestSealUsesFreshNonces(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(1))
	seen := map[string]bool{}
	for range 1000 {
		sealed, _ := s.Seal([]byte("same"))
		nonce := string(sealed[1 : 1+nonceSize])
		if seen[nonce] {
			t.Fatal("a nonce was reused")
		}
		seen[nonce] = true
	}
}

func TestOpenDetectsTampering(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(1))
	sealed, _ := s.Seal([]byte("webhook secret"))
	// Every bit of every byte (version, nonce, ciphertext, tag) is covered.
	for i := range sealed {
		for bit := range 8 {
			bad := bytes.Clone(sealed)
			bad[i] ^= 1 << bit
			if pt, err := s.Open(bad); !errors.Is(err, ErrCannotOpen) || pt != nil {
				t.Fatalf("byte %d bit %d flipped: got %q, %v; want ErrCannotOpen", i, bit, pt, err)
			}
		}
	}
	for n := range len(sealed) {
		if _, err := s.Open(sealed[:n]); !errors.Is(err, ErrCannotOpen) {
			t.Fatalf("truncated to %d bytes: %v, want ErrCannotOpen", n, err)
		}
	}
	if _, err := s.Open(append(bytes.Clone(sealed), 0)); !errors.Is(err, ErrCannotOpen) {
		t.Fatalf("extended by a byte: %v, want ErrCannotOpen", err)
	}
}

func TestOpenWrongKey(t *testing.T) {
	t.Parallel()
	sealed, _ := mustSealer(t, testKey(1)).Seal([]byte("secret"))
	_, err := mustSealer(t, testKey(2)).Open(sealed)
	if !errors.Is(err, ErrCannotOpen) {
		t.Fatalf("Open with another key: %v, want ErrCannotOpen", err)
	}
}

func TestOpenMalformed(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(1))
	tests := map[string][]byte{
		"nil":             nil,
		"empty":           {},
		"version only":    {version1},
		"one short":       append([]byte{version1}, make([]byte, overhead-2)...),
		"minimum, forged": append([]byte{version1}, make([]byte, overhead-1)...),
		"unknown version": append([]byte{2}, make([]byte, 40)...),
		"version zero":    make([]byte, 40),
	}
	for name, in := range tests {
		if pt, err := s.Open(in); !errors.Is(err, ErrCannotOpen) || pt != nil {
			t.Errorf("%s: got %q, %v; want ErrCannotOpen", name, pt, err)
		}
	}
}

// FuzzOpen feeds Open arbitrary bytes: it must never panic, and must never
// accept anything but an untouched sealed value. Only "hello" is ever sealed
// under this key (fuzz workers each seal their own copy, with their own
// nonce), so anything Open accepts must decrypt to it.
func FuzzOpen(f *testing.F) {
	s := mustSealer(f, testKey(7))
	valid, _ := s.Seal([]byte("hello"))
	f.Add(valid)
	f.Add([]byte{})
	f.Add([]byte{version1})
	f.Add(valid[:overhead-1])
	f.Add(append([]byte{9}, valid[1:]...))
	f.Fuzz(func(t *testing.T, in []byte) {
		pt, err := s.Open(in)
		if err != nil {
			if pt != nil {
				t.Fatalf("error %v with a non-nil plaintext", err)
			}
			return
		}
		if string(pt) != "hello" {
			t.Fatalf("accepted %x, which Seal did not produce, as %q", in, pt)
		}
	})
}

// FuzzSealOpen checks that whatever is sealed opens to itself.
func FuzzSealOpen(f *testing.F) {
	s := mustSealer(f, testKey(7))
	f.Add([]byte("hello"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, pt []byte) {
		sealed, err := s.Seal(pt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Open(sealed)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("round trip of %x: %x, %v", pt, got, err)
		}
	})
}
