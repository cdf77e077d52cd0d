package budget

import "errors"

// Observer receives a budget's events, for metrics. Every func is
// optional and is called synchronously on the caller's goroutine, after
// the call's script (for a Reserve that returned ErrUnknown, on its
// batch's goroutine when the reply comes): keep it cheap (count, do not
// do I/O).
type Observer struct {
	// OnGrant: Reserve made a new hold counting against promotion's caps,
	// once per line (a repeated Reserve of the same order is not a grant).
	OnGrant func(budget, promotion string)
	// OnRefusal: Reserve was refused because a cap of promotion was
	// reached; cap is the Cap's String ("uses per customer", "spend per
	// day in Europe/Berlin") or "per cart" for MaxPerCart.
	OnRefusal func(budget, promotion, cap string)
	// OnHoldExpired: a hold ended unpaid, when its report was taken, by
	// Expire (Expiry.First) or by a Release that found it ended: one per
	// expired order (only with Options.Expiry, which files the reports).
	OnHoldExpired func(budget string)
}

func (b *Budget) granted(lines []Line) {
	if f := b.o.Observer.OnGrant; f != nil {
		for _, l := range lines {
			f(b.name, l.Promotion)
		}
	}
}

// refused reports a refusal by a cap and returns err unchanged.
func (b *Budget) refused(err error) error {
	var le *LimitError
	if f := b.o.Observer.OnRefusal; f != nil && errors.As(err, &le) {
		c := le.Cap.String()
		if le.PerCart {
			c = "per cart"
		}
		f(b.name, le.Promotion, c)
	}
	return err
}

func (b *Budget) expired(e Expiry) {
	if f := b.o.Observer.OnHoldExpired; f != nil && e.First && e.State == Expired {
		f(b.name)
	}
}
