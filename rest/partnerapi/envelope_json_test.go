package partnerapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"gatehouse/internal/order"
)

// trickyStrings are strings encoding/json treats specially: quotes and
// backslashes, every control character, HTML characters (not escaped
// here), invalid UTF-8, U+2028/U+2029, multi-byte runes, a lone
// surrogate's encoding.
var trickyStrings = func() []string {
	s := []string{"", "SO1001", `a"b`, `back\slash`, "<script>&amp;</script>", "tab\there", "\x7f", "é漢字🙂",
		"\u2028line\u2029para", "\xff\xfe", "ok\xc3", "\xed\xa0\x80", "mixed \x01\x1f \"\\ \u2028 \xff end"}
	for c := range 0x20 {
		s = append(s, "x"+string(rune(c))+"y")
	}
	return s
}()

// randomString mixes ASCII, control bytes, multi-byte runes and
// invalid bytes.
func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", `"`, `\`, "<", ">", "&", "\n", "\x00", "\x1b", "\x7f", "é", "漢", "🙂", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x80"}
	var b bytes.Buffer
	for range r.IntN(12) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// encodingJSON is what the envelope's encoding/json path writes for v.
func encodingJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestAppendJSONMatchesEncodingJSON: every reply that writes its own JSON,
// and the envelope around it (success with data, errors without), gives
// the bytes encoding/json gives, for tricky and random strings, amounts
// and numbers.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := append([]string(nil), trickyStrings...)
	for range 2000 {
		strs = append(strs, randomString(r))
	}
	pick := func() string { return strs[r.IntN(len(strs))] }
	amounts := []int64{0, 1, 9, 10, 99, 100, 9990, 123456789, -1, -250, 1 << 62}
	check := func(v any, data jsonAppender) {
		t.Helper()
		want := encodingJSON(t, v)
		if data != nil {
			// The data alone (encoding/json adds a newline).
			if got := string(data.appendJSON(nil)) + "\n"; got != want {
				t.Fatalf("appendJSON of %#v:\n got %q\nwant %q", v, got, want)
			}
		}
	}
	for i, s := range strs {
		if got, want := string(appendJSONString(nil, s))+"\n", encodingJSON(t, s); got != want {
			t.Fatalf("string %d %q:\n got %q\nwant %q", i, s, got, want)
		}
		v1 := orderV1{OrderNo: s, Amount: order.Amount(amounts[i%len(amounts)]), Status: order.Status(pick())}
		check(v1, v1)
		pay := pick()
		v2 := orderV2{orderV1: v1, CreateTime: pick(), CustomerInfo: customerInfoV2{Name: pick(), Phone: pick(), Email: pick()}}
		check(v2, v2)
		v2.PayTime = &pay
		check(v2, v2)
		v3 := orderV3{orderV1: v1, CreateTime: v2.CreateTime, PayTime: v2.PayTime}
		check(v3, v3)
		v3.CustomerInfo = &v2.CustomerInfo
		check(v3, v3)
		d := deductionReply{BizNo: s, SkuID: r.IntN(1 << 30), Quantity: r.Int64N(1000) - 10, RemainingStock: r.Int64() - r.Int64()}
		check(d, d)

		for _, e := range []Envelope{
			{Code: CodeSuccess, Message: "success", Data: v2, Timestamp: r.Int64(), RequestID: pick()},
			{Code: CodeSuccess, Message: "success", Data: d, Timestamp: 1795665344292, RequestID: "JgD529sFmaln20Ta"},
			{Code: CodeSignatureError, Message: message("signature verification failed", s), Timestamp: 1, RequestID: pick()},
			{Code: -7, Message: pick()},
		} {
			if got, want := string(appendEnvelope(nil, &e)), encodingJSON(t, e); got != want {
				t.Fatalf("envelope %#v:\n got %q\nwant %q", e, got, want)
			}
		}
	}
}
