package cache

import (
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

type invObs struct {
	NopObserver
	last atomic.Int64
}

func (o *invObs) OnNear(id string, ev NearEvent) {
	if ev == NearInvalidate {
		o.last.Store(time.Now().UnixNano())
	}
}

func TestScratchInvalidationDelay(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testCtx(t)
	writer := newCache(t, b, Options{})
	var obss []*invObs
	var ncs []*Cache
	for k := 0; k < 2; k++ {
		obs := &invObs{}
		obss = append(obss, obs)
		ncs = append(ncs, newNearCache(t, nearClient(t, b), b.Prefix, Options{Observer: obs}))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 8; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ncs[r%2].Match(ctx, QuantityQuery("flip", 3), MatchOptions{})
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	var lat []time.Duration
	for i := 0; i < 200; i++ {
		p := versioned("v"+string(rune('a'+i%2)), 2, 4, 6)
		before := []int64{obss[0].last.Load(), obss[1].last.Load()}
		if _, err := writer.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		ret := time.Now()
		for k := 0; k < 2; k++ {
			deadline := time.Now().Add(2 * time.Second)
			for obss[k].last.Load() == before[k] {
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Microsecond)
			}
			lat = append(lat, time.Duration(obss[k].last.Load()-ret.UnixNano()))
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	t.Logf("p50 %v p90 %v p99 %v max %v", lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)*99/100], lat[len(lat)-1])
}
