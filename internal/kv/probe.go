package kv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/errs"
)

// probeTTL keeps the readiness probe's key only as long as needed.
const probeTTL = 10 * time.Second

// probe writes a short-lived key on every master: one that answers PING but
// refuses writes (READONLY from a demoted master, MOVED from a cluster node
// that does not own the key, CLUSTERDOWN, OOM, MISCONF) fails it like one
// that is unreachable.
func (s *redisStore) probe(ctx context.Context) error {
	stamp := strconv.FormatInt(time.Now().UnixMilli(), 10)
	switch c := s.c.(type) {
	case *redis.ClusterClient:
		return wrap("probe", c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			key, err := s.localKey(ctx, m, "readyz")
			if err != nil {
				return fmt.Errorf("master %s: %w", m.Options().Addr, err)
			}
			if err := m.Set(ctx, key, stamp, probeTTL).Err(); err != nil {
				return fmt.Errorf("master %s: %w", m.Options().Addr, err)
			}
			return nil
		}))
	default:
		// A cluster node named by a redis:// URL answers for its own slots
		// only: every other key would be MOVED. Say so rather than let a
		// probe key that happens to live on it pass.
		info, err := s.c.Info(ctx, "cluster").Result()
		if err != nil {
			return wrap("probe", err)
		}
		if strings.Contains(info, "cluster_enabled:1") {
			return fmt.Errorf("%w: kv probe: %w", errs.Unavailable, errClusterNode)
		}
		return wrap("probe", s.c.Set(ctx, s.prefix+"readyz", stamp, probeTTL).Err())
	}
}

// Masters runs fn on every master behind c: the one server of a
// single-node or Sentinel client, every master of a cluster (concurrently).
func Masters(ctx context.Context, c redis.UniversalClient, fn func(ctx context.Context, m redis.Cmdable) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return fn(ctx, m) })
	}
	return fn(ctx, c)
}

// localKey is prefix+name tagged so that the key lives in a slot that
// master m owns (by m's own view of the cluster).
func (s *redisStore) localKey(ctx context.Context, m *redis.Client, name string) (string, error) {
	id, err := m.ClusterMyID(ctx).Result()
	if err != nil {
		return "", err
	}
	shards, err := m.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		mine := false
		for _, n := range sh.Nodes {
			mine = mine || n.ID == id && n.Role == "master"
		}
		if !mine {
			continue
		}
		for _, r := range sh.Slots {
			for i := 0; i < 1<<20; i++ {
				tag := name + ":" + strconv.Itoa(i)
				if slot := int64(keySlot(tag)); slot >= r.Start && slot <= r.End {
					return s.prefix + name + ":{" + tag + "}", nil
				}
			}
		}
	}
	return "", errors.New("owns no slot")
}

// keySlot is Redis Cluster's hash slot of a hash tag's text: CRC16
// (XMODEM) modulo 16384.
func keySlot(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// refusedWrites are the replies of a Redis that answers but will not take
// a write now.
var refusedWrites = []string{"READONLY", "MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN", "OOM", "MISCONF", "NOREPLICAS", "MASTERDOWN", "LOADING"}

// WriteRefused reports whether err (from [Store.Ping]) is a Redis that
// answered but refused the probe's write, rather than one that did not
// answer; a cluster node named by a single-node URL counts too.
func WriteRefused(err error) bool {
	if errors.Is(err, errClusterNode) {
		return true
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	for _, p := range refusedWrites {
		if strings.HasPrefix(reply.Error(), p) {
			return true
		}
	}
	return false
}

var errClusterNode = errors.New("this Redis is a cluster node; name the cluster with redis+cluster://host:port,host:port")
