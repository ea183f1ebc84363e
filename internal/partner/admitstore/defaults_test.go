package admitstore

import (
	"testing"

	"gatehouse/internal/config"
)

// TestDefaultNonceMemoryMaxIsTheSetting: the memory store keeps a default
// bound for tools and tests that open it without a configuration; it must
// be GATEHOUSE_NONCE_MEMORY_MAX's declared default, or a process and a
// tool would bound the replay memory differently.
func TestDefaultNonceMemoryMaxIsTheSetting(t *testing.T) {
	if d := config.Defaults().Redis.NonceMemoryMax; d != DefaultNonceMemoryMax {
		t.Errorf("GATEHOUSE_NONCE_MEMORY_MAX defaults to %d, admitstore to %d", d, DefaultNonceMemoryMax)
	}
}
