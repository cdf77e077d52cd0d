package measure

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RoundTrips counts network round trips through a go-redis hook: one per
// single command and one per pipeline or transaction sent to a node.
// On a ClusterClient it counts per node, so a cluster pipeline split over
// three masters shows as one round trip on each.
type RoundTrips struct {
	mu      sync.Mutex
	total   int
	perNode map[string]int
	hooked  map[*redis.Client]bool // node clients that carry the hook
}

// CountRoundTrips installs a counting hook on c. For a ClusterClient the
// hook goes on every node client, present and future.
func CountRoundTrips(ctx context.Context, c redis.UniversalClient) (*RoundTrips, error) {
	rt := &RoundTrips{perNode: map[string]int{}, hooked: map[*redis.Client]bool{}}
	switch cc := c.(type) {
	case *redis.ClusterClient:
		cc.OnNewNode(rt.hookNode)
		// Nodes created before OnNewNode was registered need the hook too;
		// nodes that ForEachShard itself creates got it from OnNewNode.
		err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			rt.hookNode(n)
			return nil
		})
		if err != nil {
			return nil, err
		}
	case *redis.Client:
		cc.AddHook(rt.hook(cc.Options().Addr))
	default:
		c.AddHook(rt.hook("client"))
	}
	return rt, nil
}

func (rt *RoundTrips) hook(addr string) redis.Hook { return rtHook{rt: rt, addr: addr} }

// hookNode installs the hook on a cluster node once.
func (rt *RoundTrips) hookNode(n *redis.Client) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.hooked[n] {
		return
	}
	rt.hooked[n] = true
	n.AddHook(rt.hook(n.Options().Addr))
}

func (rt *RoundTrips) add(addr string) {
	rt.mu.Lock()
	rt.total++
	rt.perNode[addr]++
	rt.mu.Unlock()
}

// Total returns the round trips counted so far.
func (rt *RoundTrips) Total() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.total
}

// PerNode returns a copy of the per-node counts.
func (rt *RoundTrips) PerNode() map[string]int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make(map[string]int, len(rt.perNode))
	for k, v := range rt.perNode {
		out[k] = v
	}
	return out
}

// Reset zeroes the counts.
func (rt *RoundTrips) Reset() {
	rt.mu.Lock()
	rt.total = 0
	rt.perNode = map[string]int{}
	rt.mu.Unlock()
}

type rtHook struct {
	rt   *RoundTrips
	addr string
}

func (h rtHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h rtHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !clusterReload(cmd) {
			h.rt.add(h.addr)
		}
		return next(ctx, cmd)
	}
}

// clusterReload reports whether cmd is the CLUSTER SLOTS or SHARDS that a
// go-redis ClusterClient sends on its own, in the background, whenever its
// slot map is older than its reload interval: to a random node, replicas
// included. It is not a round trip of the call being counted.
func clusterReload(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 || cmd.Name() != "cluster" {
		return false
	}
	sub, _ := args[1].(string)
	return strings.EqualFold(sub, "slots") || strings.EqualFold(sub, "shards")
}

func (h rtHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.rt.add(h.addr)
		return next(ctx, cmds)
	}
}
