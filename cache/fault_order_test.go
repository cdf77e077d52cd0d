package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// gatedLoader is a source whose first Load reads the promotion as it is
// then, says so on read, and returns it only once release is closed:
// the window in which another writer publishes a newer version. Later
// loads answer from the source as it is when they run.
type gatedLoader struct {
	mu      sync.Mutex
	promo   *gradient.Promotion // nil: deleted in the source
	first   atomic.Bool
	read    chan struct{}
	release chan struct{}
	calls   atomic.Int64
}

func (l *gatedLoader) set(p *gradient.Promotion) {
	l.mu.Lock()
	l.promo = p
	l.mu.Unlock()
}

func (l *gatedLoader) Load(ctx context.Context, id string) (*gradient.Promotion, error) {
	l.calls.Add(1)
	l.mu.Lock()
	p := l.promo
	l.mu.Unlock()
	if l.first.CompareAndSwap(false, true) {
		close(l.read)
		select {
		case <-l.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if p == nil {
		return nil, fmt.Errorf("source: %q: %w", id, ErrUnknownPromotion)
	}
	cp := *p
	return &cp, nil
}

// TestFaultLoadRace: a read-through load reads v1, then (while its Load
// is held) a warm-up's Refresh publishes v2, or a Delete removes the
// promotion, and returns; then the load finishes. From the moment the
// newer write returned, no read (through the loading process's near
// cache, another process's near cache, or plain Redis) ever serves v1:
// the load's write-through is refused (LoadStale) and its own line is
// answered from what Redis holds. Ordered (revisions 1 then 2) and
// unordered (revision 0: the lease alone orders them).
func TestFaultLoadRace(t *testing.T) {
	tests := []struct {
		name    string
		del     bool
		ordered bool
	}{
		{"update/ordered", false, true},
		{"update/unordered", false, false},
		{"delete/ordered", true, true},
		{"delete/unordered", true, false},
	}
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				loadRace(t, b, tt.name, tt.del, tt.ordered)
			})
		}
	})
}

func loadRace(t *testing.T, b *testredis.Backend, name string, del, ordered bool) {
	ctx := testCtx(t)
	id := "race-" + map[bool]string{false: "upd", true: "del"}[del] + map[bool]string{false: "-u", true: "-o"}[ordered]
	rev := func(r int64) int64 {
		if ordered {
			return r
		}
		return 0
	}
	v1, v2 := revPromotion(id, rev(1), 1), revPromotion(id, rev(2), 2)
	ver1, _ := Version(&v1, Options{})
	ver2, _ := Version(&v2, Options{})
	src := &gatedLoader{promo: &v1, read: make(chan struct{}), release: make(chan struct{})}
	obs := &countingObserver{}
	near := &NearCacheOptions{MaxStaleness: 500 * time.Millisecond}
	loading := newCache(t, b, Options{Loader: src, NearCache: near, Observer: obs})
	other := newCache(t, b, Options{NearCache: near})
	plain := newCache(t, b, Options{})
	writer := newCache(t, b, Options{})
	t.Cleanup(func() { _ = loading.Close(); _ = other.Close() })

	type answer struct {
		r   Result
		err error
	}
	first := make(chan answer, 1)
	go func() {
		r, err := loading.Match(ctx, QuantityQuery(id, 4), MatchOptions{})
		first <- answer{r, err}
	}()
	select {
	case <-src.read:
	case <-ctx.Done():
		t.Fatal("the load never read the source")
	}
	// The source changes, and another writer publishes the change.
	if del {
		src.set(nil)
		if res, err := writer.Delete(ctx, id, rev(2)); err != nil || res.Outcome != Absent {
			t.Fatalf("Delete: %+v %v", res, err)
		}
	} else {
		src.set(&v2)
		if rep, err := writer.Refresh(ctx, v2); err != nil || rep.Added != 1 {
			t.Fatalf("Refresh v2: %+v %v", rep, err)
		}
	}
	// From here on, v1 must never be served. Readers run through the
	// load's end and after it.
	var old, reads atomic.Int64
	var wrong sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range []*Cache{loading, other, plain} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := c.Match(ctx, QuantityQuery(id, 4), MatchOptions{})
				reads.Add(1)
				switch {
				case r.Version == ver1:
					old.Add(1)
				case err != nil && ctx.Err() != nil:
					return
				case del && !errors.Is(err, ErrNotFound), !del && (err != nil || r.Version != ver2):
					wrong.Store(fmt.Sprintf("%v %v", r.Version, err), true)
				}
			}
		}()
	}
	close(src.release)
	a := <-first
	switch {
	case del && !errors.Is(a.err, ErrNotFound):
		t.Errorf("the loading line: %+v %v, want ErrNotFound", a.r, a.err)
	case !del && (a.err != nil || a.r.Version != ver2):
		t.Errorf("the loading line: version %s %v, want v2 %s", a.r.Version, a.err, ver2)
	}
	// Keep reading until each cache has answered well after the load.
	target := reads.Load() + 300
	for reads.Load() < target && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	wrong.Range(func(k, _ any) bool { t.Errorf("%s: a read answered %s", name, k); return true })
	if n := old.Load(); n != 0 {
		t.Fatalf("%s: %d of %d reads served v1 after the newer write returned", name, n, reads.Load())
	}
	if n := obs.loads[LoadStale].Load(); n != 1 {
		t.Fatalf("%s: %d stale loads, want 1 (loads by outcome %v)", name, n, &obs.loads)
	}
	in, err := plain.Info(ctx, id)
	switch {
	case del && !errors.Is(err, ErrNotFound):
		t.Fatalf("Info after: %+v %v", in, err)
	case !del && (err != nil || in.Version != ver2 || in.Revision != rev(2)):
		t.Fatalf("Info after: %+v %v", in, err)
	}
	t.Logf("%s: %d reads after the newer write, 0 served v1; loads %d", name, reads.Load(), src.calls.Load())
}
