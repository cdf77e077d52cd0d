package measure

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestClusterReloadNotCounted: the slot-map reloads a ClusterClient sends
// on its own timer are not round trips of the call being counted; every
// other command is.
func TestClusterReloadNotCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		args   []any
		reload bool
	}{
		{[]any{"cluster", "slots"}, true},
		{[]any{"CLUSTER", "SHARDS"}, true},
		{[]any{"cluster", "info"}, false},
		{[]any{"cluster"}, false},
		{[]any{"evalsha", "abc", "1", "k"}, false},
		{[]any{"get", "slots"}, false},
	} {
		if got := clusterReload(redis.NewCmd(ctx, tt.args...)); got != tt.reload {
			t.Errorf("clusterReload(%v) = %v, want %v", tt.args, got, tt.reload)
		}
	}
}
