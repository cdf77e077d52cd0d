package pg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tierset/tierset/delay"
)

// TestInvalidInput checks that every refused argument or option is a
// *ValidationError naming it, matching ErrInvalid, before anything is
// read or written.
func TestInvalidInput(t *testing.T) {
	pool, schema := testDB(t)
	q, _ := testQueue(t, delay.Options{})
	o, err := NewOutbox(pool, schema, q, OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		field string
		call  func(ctx context.Context) error
	}{
		{"bad schema", "schema", func(ctx context.Context) error { _, err := Migrate(ctx, pool, "Bad-Schema"); return err }},
		{"rules nil DB", "options", func(context.Context) error { _, err := NewRules(nil, schema); return err }},
		{"outbox nil DB", "options", func(context.Context) error { _, err := NewOutbox(nil, schema, q, OutboxOptions{}); return err }},
		{"outbox nil queue", "options", func(context.Context) error { _, err := NewOutbox(pool, schema, nil, OutboxOptions{}); return err }},
		{"purge limit 0", "limit", func(ctx context.Context) error { _, err := o.Purge(ctx, time.Now(), 0); return err }},
		{"relay once batch 0", "options", func(ctx context.Context) error { _, err := o.RelayOnce(ctx, 0); return err }},
		{"relay once batch over MaxBatch", "options", func(ctx context.Context) error { _, err := o.RelayOnce(ctx, delay.MaxBatch+1); return err }},
		{"relay negative poll", "options", func(ctx context.Context) error { return o.Relay(ctx, RelayOptions{Poll: -time.Second}) }},
		{"relay batch over MaxBatch", "options", func(ctx context.Context) error { return o.Relay(ctx, RelayOptions{Batch: delay.MaxBatch + 1}) }},
		{"pending bad cursor", "cursor", func(ctx context.Context) error {
			_, _, err := o.Source().Pending(ctx, time.Now(), "x", 10)
			return err
		}},
		{"pending limit 0", "limit", func(ctx context.Context) error { _, _, err := o.Source().Pending(ctx, time.Now(), "", 0); return err }},
		{"reschedule At and After", "when", func(ctx context.Context) error {
			_, err := o.Reschedule(ctx, "k", delay.When{At: time.Now(), After: time.Second})
			return err
		}},
		{"enqueue nil tx", "tx", func(ctx context.Context) error { _, err := o.Enqueue(ctx, nil, delay.Job{Key: "k"}); return err }},
		{"enqueue typed nil tx", "tx", func(ctx context.Context) error {
			_, err := o.Enqueue(ctx, (*pgxpool.Tx)(nil), delay.Job{Key: "k"})
			return err
		}},
		{"done typed nil tx", "tx", func(ctx context.Context) error { return o.Done(ctx, (*pgxpool.Tx)(nil), "k", "t") }},
		{"watch nil pool", "options", func(ctx context.Context) error { return Watch(ctx, nil, nil, nil, WatchOptions{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(testCtx(t, 10*time.Second))
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field || !errors.Is(err, ErrInvalid) || !errors.Is(err, &ValidationError{Field: tt.field}) {
				t.Fatalf("err = %v, want a *ValidationError with Field %q matching ErrInvalid", err, tt.field)
			}
			if ve.Detail == "" {
				t.Errorf("err %v has no Detail", err)
			}
		})
	}
}
