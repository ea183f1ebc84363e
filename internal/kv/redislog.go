package kv

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// debugLogger sends go-redis's internal log lines (one per failed dial,
// printed to stderr by default) to slog at debug level: every failure also
// reaches the caller as errs.Unavailable and is answered and logged there,
// so an outage should not also flood stderr with unstructured lines.
type debugLogger struct{}

func (debugLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

var quietRedis sync.Once

// quietRedisLogs installs debugLogger once (go-redis's logger is global).
func quietRedisLogs() { quietRedis.Do(func() { redis.SetLogger(debugLogger{}) }) }
