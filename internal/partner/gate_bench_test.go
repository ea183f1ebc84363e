package partner

import (
	"context"
	"gatehouse/internal/store/storetest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/kv"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// BenchmarkGateCheck is the in-process cost of the signed-request checks
// (parse, cached app, MD5, nonce + sliding window on the memory store),
// without HTTP or the business read.
func BenchmarkGateCheck(b *testing.B) {
	db := storetest.Open(b, testenv.Backend{Name: "sqlite"})
	store, err := kv.Open(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	svc := newService(b, db)
	lim := MaxRateLimit
	app, sec, err := svc.Create(context.Background(), CreateInput{AppName: "bench", RateLimit: &lim})
	if err != nil {
		b.Fatal(err)
	}
	g := NewGate(svc, store)
	queries := make([]string, b.N)
	now := time.Now()
	for i := range queries {
		s := partnerclient.Signer{AppKey: app.AppKey, AppSecret: sec.AppSecret,
			Now: func() time.Time { return now }, Nonce: func() string { return "n" + strconv.Itoa(i) }}
		v, err := s.Sign(url.Values{"order_no": {"SO1001"}, "page": {"1"}})
		if err != nil {
			b.Fatal(err)
		}
		queries[i] = v.Encode()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := g.Check(context.Background(), queries[i]); err != nil {
			b.Fatal(err)
		}
	}
}
