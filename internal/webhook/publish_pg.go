package webhook

import (
	"context"

	"gatehouse/ent"
	"gatehouse/internal/webhook/publishdb"
)

// pubKey is an idempotency key of an app.
type pubKey struct {
	app int
	key string
}

// keysOf are claims' idempotency keys with their messages (from msg), in
// the claims' order.
func keysOf(claims []*pubCall, msg func(*pubCall) *Published) []publishdb.Key {
	keys := make([]publishdb.Key, len(claims))
	for i, c := range claims {
		keys[i] = publishdb.Key{App: c.req.AppID, Key: c.req.IdempotencyKey, EventID: msg(c).ID,
			EventType: c.req.EventType, BizData: string(c.req.BizData)}
	}
	return keys
}

// takenKeys reads the keys of claims back: a key whose row holds another
// message than the claim's was taken already (within its window), and
// that message answers the claim as a repeat.
func takenKeys(ctx context.Context, tx *ent.Tx, claims []*pubCall, msg func(*pubCall) *Published) (map[*pubCall]*Published, error) {
	return repeats(ctx, tx, claims, keysOf(claims, msg))
}

// repeats answers each claim whose key holds another message with that
// message (Replayed; its bizData is not read back).
func repeats(ctx context.Context, tx *ent.Tx, claims []*pubCall, keys []publishdb.Key) (map[*pubCall]*Published, error) {
	taken, err := publishdb.TakenBy(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[*pubCall]*Published, len(taken))
	for i, p := range taken {
		out[claims[i]] = &Published{ID: p.EventID, AppID: p.AppID, EventType: p.EventType,
			IdempotencyKey: p.IdempotencyKey, CreateTime: p.CreateTime, Replayed: true}
	}
	return out, nil
}
