package partner

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"gatehouse/rest/partnerclient"
)

func TestParseSignedQuery(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100_000)
	for _, tt := range []struct {
		name      string
		raw       string
		params    []Param
		canonical string // of timestamp "1", nonce "n" and the params
		dup       string
		malformed bool
	}{
		{name: "empty", raw: ""},
		{name: "signing parameters only", raw: "app_key=k&timestamp=1&nonce=n&sign=s"},
		{name: "sorted by name", raw: "b=2&a=1&c=3", params: []Param{{"a", "1"}, {"b", "2"}, {"c", "3"}}, canonical: "1na1b2c3"},
		{name: "byte order, upper case first", raw: "b=1&B=2&_=3", params: []Param{{"B", "2"}, {"_", "3"}, {"b", "1"}}, canonical: "1nB2_3b1"},
		{name: "encoded & and =", raw: "order_no=A%26B%3DC", params: []Param{{"order_no", "A&B=C"}}, canonical: "1norder_noA&B=C"},
		{name: "encoded name", raw: "a%3Db%26c=1", params: []Param{{"a=b&c", "1"}}, canonical: "1na=b&c1"},
		{name: "plus is a space", raw: "q=a+b%2Bc", params: []Param{{"q", "a b+c"}}, canonical: "1nqa b+c"},
		{name: "semicolon is data", raw: "q=a;b&r=1", params: []Param{{"q", "a;b"}, {"r", "1"}}, canonical: "1nqa;br1"},
		{name: "empty values", raw: "a=&b&c=", params: []Param{{"a", ""}, {"b", ""}, {"c", ""}}, canonical: "1nabc"},
		{name: "empty name", raw: "=v", params: []Param{{"", "v"}}, canonical: "1nv"},
		{name: "empty segments skipped", raw: "&&a=1&&", params: []Param{{"a", "1"}}, canonical: "1na1"},
		{name: "second = is data", raw: "a=b=c", params: []Param{{"a", "b=c"}}, canonical: "1nab=c"},
		{name: "unicode", raw: "%E5%90%8D=%E5%80%BC&e=%F0%9F%98%80", params: []Param{{"e", "😀"}, {"名", "值"}}, canonical: "1ne😀名值"},
		{name: "raw unicode", raw: "名=值", params: []Param{{"名", "值"}}, canonical: "1n名值"},
		{name: "invalid utf-8 kept as bytes", raw: "a=%FF", params: []Param{{"a", "\xff"}}, canonical: "1na\xff"},
		{name: "nul byte", raw: "a=%00", params: []Param{{"a", "\x00"}}, canonical: "1na\x00"},
		{name: "very long", raw: "a=" + long, params: []Param{{"a", long}}, canonical: "1na" + long},
		{name: "sign_type is a business parameter", raw: "sign_type=HMAC-SHA256&sign=x", params: []Param{{"sign_type", "HMAC-SHA256"}}, canonical: "1nsign_typeHMAC-SHA256"},
		{name: "duplicate business parameter", raw: "a=1&a=2", params: []Param{{"a", "1"}}, dup: "a"},
		{name: "duplicate with the same value", raw: "a=1&a=1", params: []Param{{"a", "1"}}, dup: "a"},
		{name: "duplicate nonce", raw: "nonce=1&nonce=2", dup: "nonce"},
		{name: "duplicate spelled differently", raw: "a=1&%61=2", params: []Param{{"a", "1"}}, dup: "a"},
		{name: "bad escape", raw: "a=%zz&b=1", params: []Param{{"b", "1"}}, malformed: true},
		{name: "truncated escape", raw: "a=1&b=%", params: []Param{{"a", "1"}}, malformed: true},
		{name: "bad escape in name", raw: "%=1", malformed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := ParseSignedQuery(tt.raw)
			if !slices.Equal(q.Params, tt.params) {
				t.Fatalf("params %q, want %q", q.Params, tt.params)
			}
			if q.Duplicate != tt.dup || q.Malformed != tt.malformed {
				t.Fatalf("duplicate %q malformed %v, want %q %v", q.Duplicate, q.Malformed, tt.dup, tt.malformed)
			}
			if tt.canonical != "" {
				if got := Canonical("1", "n", q.Params); got != tt.canonical {
					t.Fatalf("canonical %q, want %q", got, tt.canonical)
				}
			}
		})
	}
}

func TestParseSignedQuerySigningParameters(t *testing.T) {
	t.Parallel()
	q := ParseSignedQuery("sign=ABC&nonce=n%201&timestamp=1763805600123&app_key=k_1&order_no=SO1001")
	if q.AppKey != "k_1" || q.Timestamp != "1763805600123" || q.Nonce != "n 1" || q.Sign != "ABC" {
		t.Fatalf("%+v", q)
	}
	if v, ok := q.Get("order_no"); !ok || v != "SO1001" {
		t.Fatalf("Get(order_no) = %q %v", v, ok)
	}
	if _, ok := q.Get("sign"); ok {
		t.Fatal("sign is not a business parameter")
	}
}

// The documented example: md5(secret + timestamp + nonce + sorted name/value pairs).
func TestDigest(t *testing.T) {
	t.Parallel()
	c := Canonical("1763805600123", "abc", []Param{{"order_no", "SO1001"}, {"page", "1"}})
	if c != "1763805600123abcorder_noSO1001page1" {
		t.Fatalf("canonical %q", c)
	}
	// echo -n 's3cr3t1763805600123abcorder_noSO1001page1' | md5sum
	if got := Digest(SignMD5, []byte("s3cr3t"), c); got != "0eb8ee54e9215de49eeb1b2def7fbae2" {
		t.Fatalf("md5 %q", got)
	}
	// echo -n '1763805600123abcorder_noSO1001page1' | openssl dgst -sha256 -hmac s3cr3t
	if got := Digest(SignHMACSHA256, []byte("s3cr3t"), c); got != "a940bd35413d3da20e0ac4f462ecbea5c1037568eedf26771ebd1de63bc9e95b" {
		t.Fatalf("hmac %q", got)
	}
	for _, st := range []SignType{SignMD5, SignHMACSHA256} {
		a := Digest(st, []byte("s3cr3t"), c)
		if a != strings.ToLower(a) || a == Digest(st, []byte("other"), c) || a == Digest(st, []byte("s3cr3t"), c+"x") {
			t.Fatalf("%v digest %q", st, a)
		}
	}
	if len(Digest(SignHMACSHA256, []byte("k"), c)) != 64 {
		t.Fatal("HMAC-SHA256 hex is 64 characters")
	}
}

func TestParseSignType(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]SignType{"": SignMD5, "MD5": SignMD5, "md5": SignMD5, "HMAC-SHA256": SignHMACSHA256, "hmac-sha256": SignHMACSHA256} {
		if got, err := ParseSignType(in); err != nil || got != want {
			t.Errorf("ParseSignType(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"SHA1", "HMAC-SHA1", "HMACSHA256", " MD5", "md5 "} {
		if _, err := ParseSignType(in); err == nil {
			t.Errorf("ParseSignType(%q) accepted", in)
		}
	}
}

// TestAgainstSDK: what the SDK signs, the server verifies, for awkward
// parameters (both implementations are independent).
func TestAgainstSDK(t *testing.T) {
	t.Parallel()
	for _, params := range []url.Values{
		{},
		{"order_no": {"SO1001"}},
		{"a": {""}, "B": {"x y"}, "c": {"1+1=2&3"}},
		{"名字": {"值"}, "e": {"😀"}, "z": {"\x00\xff"}},
		{"": {"empty name"}, ";": {";"}, "%": {"%"}},
		{"sign_type": {"HMAC-SHA256"}, "x": {strings.Repeat("ab", 10_000)}},
	} {
		checkAgainstSDK(t, params, "1763805600123", "nonce-1", "secret")
	}
}

func checkAgainstSDK(t *testing.T, params url.Values, ts, nonce, secret string) {
	t.Helper()
	st := partnerclient.MD5
	if v := params.Get("sign_type"); v != "" {
		st = partnerclient.SignType(v)
	}
	sdkSign, err := partnerclient.Signature(st, secret, ts, nonce, params)
	if err != nil {
		return // a sign_type neither side accepts
	}
	full := url.Values{}
	for k, v := range params {
		full[k] = v
	}
	full.Set("app_key", "k")
	full.Set("timestamp", ts)
	full.Set("nonce", nonce)
	full.Set("sign", sdkSign)
	q := ParseSignedQuery(full.Encode())
	if q.Malformed || q.Duplicate != "" {
		t.Fatalf("%q: malformed %v duplicate %q", full.Encode(), q.Malformed, q.Duplicate)
	}
	if q.Timestamp != ts || q.Nonce != nonce || q.Sign != sdkSign {
		t.Fatalf("signing parameters %+v", q)
	}
	if got, want := Canonical(q.Timestamp, q.Nonce, q.Params), partnerclient.Canonical(ts, nonce, params); got != want {
		t.Fatalf("canonical: server %q, SDK %q", got, want)
	}
	sst, err := ParseSignType(signTypeOf(&q))
	if err != nil {
		t.Fatalf("server refuses sign_type the SDK used: %v", err)
	}
	if got := Digest(sst, []byte(secret), Canonical(q.Timestamp, q.Nonce, q.Params)); got != sdkSign {
		t.Fatalf("server digest %s, SDK %s", got, sdkSign)
	}
}

// FuzzSignedQuery: for any parameters the SDK can send, the server parses
// exactly what was signed and computes the same signature.
//
//	go test -fuzz FuzzSignedQuery ./internal/partner/
func FuzzSignedQuery(f *testing.F) {
	f.Add("order_no", "SO1001", "page", "1", "1763805600123", "abc", "secret")
	f.Add("a&b", "c=d", "名", "😀", "1", "n n", "s")
	f.Add("", "", "+", "%zz", "", "", "")
	f.Add("sign_type", "HMAC-SHA256", "x", "\x00", "9", "n", "k")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2, ts, nonce, secret string) {
		params := url.Values{}
		for _, p := range [][2]string{{n1, v1}, {n2, v2}} {
			switch p[0] {
			case "app_key", "timestamp", "nonce", "sign":
				continue // added by the signer
			}
			params[p[0]] = []string{p[1]}
		}
		checkAgainstSDK(t, params, ts, nonce, secret)
	})
}

// FuzzParseSignedQuery: any raw query parses without panicking, into
// sorted unique parameters that encode and parse back to the same.
//
//	go test -fuzz FuzzParseSignedQuery ./internal/partner/
func FuzzParseSignedQuery(f *testing.F) {
	for _, s := range []string{"", "a=1&b=2", "a=%zz", "a=1&a=2", "&&=&=", "%", "名=值;x", "app_key=k&sign=s&nonce=&timestamp=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q := ParseSignedQuery(raw)
		if !slices.IsSortedFunc(q.Params, func(a, b Param) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatalf("params not sorted: %q", q.Params)
		}
		for i := 1; i < len(q.Params); i++ {
			if q.Params[i].Name == q.Params[i-1].Name {
				t.Fatalf("name %q kept twice", q.Params[i].Name)
			}
		}
		again := url.Values{}
		for _, p := range q.Params {
			again.Set(p.Name, p.Value)
		}
		for name, v := range map[string]string{"app_key": q.AppKey, "timestamp": q.Timestamp, "nonce": q.Nonce, "sign": q.Sign} {
			if v != "" {
				again.Set(name, v)
			}
		}
		q2 := ParseSignedQuery(again.Encode())
		if q2.Malformed || q2.Duplicate != "" || !slices.Equal(q2.Params, q.Params) ||
			q2.AppKey != q.AppKey || q2.Timestamp != q.Timestamp || q2.Nonce != q.Nonce || q2.Sign != q.Sign {
			t.Fatalf("re-encoded %q parses to %+v, want %+v", again.Encode(), q2, q)
		}
		_ = Explain(SignMD5, Canonical(q.Timestamp, q.Nonce, q.Params))
	})
}
