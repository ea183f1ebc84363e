package admitstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/kv"
	"gatehouse/internal/kv/kvtest"
	"gatehouse/internal/testenv"
)

// BenchmarkAdmit measures the signed-request gate: a new nonce and a window
// that never fills, which is the common path.
func BenchmarkAdmit(b *testing.B) {
	backends := []struct {
		name string
		url  func(b *testing.B) string
	}{
		{"memory", func(*testing.B) string { return "" }},
		{"redis", func(b *testing.B) string { return testenv.RedisURL(b) }},
	}
	for _, be := range backends {
		open := func(b *testing.B) Store {
			prefix := testenv.KeyPrefix(b)
			kvs := openKV(b, be.url(b), prefix)
			if c, ok := kv.RedisClient(kvs); ok {
				b.Cleanup(func() { kvtest.DeleteKeys(b, c, prefix) })
			}
			s, err := Open(context.Background(), kvs)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
		req := func(n int64) AdmitRequest {
			return AdmitRequest{App: "bench", Nonce: strconv.FormatInt(n, 10), NonceTTL: time.Minute, Verified: true, Limit: 1 << 30, Window: time.Second}
		}
		b.Run(be.name, func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			var n int64
			for b.Loop() {
				n++
				if _, err := s.Admit(ctx, req(n)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"-parallel", func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			var seq atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Admit(ctx, req(seq.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
