package score_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/score"
)

func ExampleAmount() {
	cents, err := score.Amount(decimal.RequireFromString("99.99"), 2)
	fmt.Println(cents, err)

	_, err = score.Amount(decimal.RequireFromString("99.999"), 2)
	fmt.Println(errors.Is(err, score.ErrTooPrecise))

	// A cart total is floored for the query: 99.999 reaches the 99.99 tier.
	q, _ := score.AmountFloor(decimal.RequireFromString("99.999"), 2)
	fmt.Println(q)
	// Output:
	// 9999 <nil>
	// true
	// 9999
}

func ExampleTimeCodec() {
	var codec score.TimeCodec // Unix epoch, 10 sequence bits
	due := time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	first, _ := codec.EncodeTime(due, 0)
	second, _ := codec.EncodeTime(due, 1)
	bound, _ := codec.DueBound(due.UnixMilli())
	fmt.Println(first < second, second <= bound)

	at, seq, _ := codec.DecodeTime(second)
	fmt.Println(at.UTC().Format(time.RFC3339), seq)
	fmt.Println(codec.MaxTime().UTC().Year())
	// Output:
	// true true
	// 2026-12-01T08:30:00Z 1
	// 2248
}

func ExampleParse() {
	s, err := score.Parse(float64(9999))
	fmt.Println(s, err)
	_, err = score.Parse("9007199254740993") // 2^53 + 1
	fmt.Println(errors.Is(err, score.ErrOutOfRange))
	fmt.Println(score.Inclusive(9999), score.Exclusive(9999), score.NegInf)
	// Output:
	// 9999 <nil>
	// true
	// 9999 (9999 -inf
}
