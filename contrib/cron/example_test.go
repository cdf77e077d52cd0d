package cron_test

import (
	"fmt"
	"time"

	"github.com/tierset/tierset/contrib/cron"
)

// A daily job at 02:30 Berlin time across the spring change: on the day
// 02:30 does not exist, it runs at 03:00 CEST, the end of the gap.
func ExampleParse() {
	s, err := cron.Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	t := time.Date(2026, 3, 27, 12, 0, 0, 0, berlin)
	for range 3 {
		t = s.Next(t)
		fmt.Println(t.In(berlin).Format("Mon 02 Jan 15:04 MST"))
	}
	_, err = cron.Parse("0 * * * *", "Europe/Berlinn")
	fmt.Println(err)
	// Output:
	// Sat 28 Mar 02:30 CET
	// Sun 29 Mar 03:00 CEST
	// Mon 30 Mar 02:30 CEST
	// periodic: invalid location: "Europe/Berlinn": unknown time zone Europe/Berlinn
}
