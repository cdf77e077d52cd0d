package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/exampleredis"
)

func ExampleBudget_Reserve() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	b, _ := budget.New(rdb, "shop", budget.Options{Promotions: []budget.Promotion{{
		ID: "summer", Caps: []budget.Cap{
			{Measure: budget.Uses, Limit: 2},
			{Measure: budget.Uses, Limit: 1, Per: "customer"},
		}}}})
	_, _ = b.Rebuild(ctx, nil) // once, before first use

	reserve := func(order, cust string) error {
		_, err := b.Reserve(ctx, budget.Request{Order: order, Attributes: map[string]string{"customer": cust},
			Lines: []budget.Line{{Promotion: "summer", Uses: 1, Amount: 1250}}, Hold: 15 * time.Minute})
		return err
	}
	fmt.Println(reserve("o1", "ann"))
	err := reserve("o2", "ann")
	var le *budget.LimitError
	fmt.Println(errors.As(err, &le), le.Cap.Per)
	fmt.Println(reserve("o3", "bob"))
	fmt.Println(errors.Is(reserve("o4", "cid"), budget.ErrLimit))

	c, _ := b.Confirm(ctx, "o1")
	fmt.Println(c.Order, c.Lines[0].Amount)
	st, _ := b.Release(ctx, "o3")
	fmt.Println(st, reserve("o4", "cid"))
	// Output:
	// <nil>
	// true customer
	// <nil>
	// true
	// o1 1250
	// released <nil>
}

func ExampleBudget_Remaining() {
	rdb, mr := exampleredis.Start()
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	b, _ := budget.New(rdb, "shop", budget.Options{Promotions: []budget.Promotion{
		{ID: "summer", MaxPerCart: 3, Caps: []budget.Cap{{Measure: budget.Spend, Limit: 10_000, Per: "customer"}}},
		{ID: "winter", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 100}}},
	}})
	_, _ = b.Rebuild(ctx, nil)
	ann := map[string]string{"customer": "ann"}
	_, _ = b.Reserve(ctx, budget.Request{Order: "o1", Attributes: ann,
		Lines: []budget.Line{{Promotion: "summer", Uses: 1, Amount: 2500}, {Promotion: "winter", Uses: 1}}, Hold: time.Minute})

	left, _ := b.Remaining(ctx, ann, "summer", "winter")
	fmt.Printf("summer: %+v\nwinter: %+v\n", left["summer"], left["winter"])
	// Output:
	// summer: {Uses:3 Spend:7500}
	// winter: {Uses:99 Spend:-1}
}

func ExampleBudget_Confirm_expired() {
	rdb, mr := exampleredis.Start()
	defer exampleredis.Stop(rdb, mr)
	t0 := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(t0) // Redis TIME
	ctx := context.Background()

	b, _ := budget.New(rdb, "shop", budget.Options{Promotions: []budget.Promotion{
		{ID: "flash", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1}}}}})
	_, _ = b.Rebuild(ctx, nil)
	one := []budget.Line{{Promotion: "flash", Uses: 1}}
	res, _ := b.Reserve(ctx, budget.Request{Order: "slow", Lines: one, Hold: 10 * time.Minute})
	fmt.Println(res.State, res.Expires.UTC().Format(time.TimeOnly))

	mr.SetTime(t0.Add(11 * time.Minute)) // the hold ended unpaid
	_, err := b.Reserve(ctx, budget.Request{Order: "fast", Lines: one, Hold: 10 * time.Minute})
	fmt.Println(err)
	_, err = b.Confirm(ctx, "slow")
	fmt.Println(errors.Is(err, budget.ErrExpired), errors.Is(err, budget.ErrLimit))
	// Output:
	// held 12:10:00
	// <nil>
	// true true
}
