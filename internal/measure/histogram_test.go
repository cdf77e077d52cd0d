package measure

import (
	"fmt"
	"time"
)

func ExampleHistogram() {
	var h Histogram
	for i := 1; i <= 100; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	fmt.Println(h.Count(), h.Max(), h.Percentile(50) >= 49*time.Millisecond && h.Percentile(50) <= 52*time.Millisecond)
	// Output:
	// 100 100ms true
}
