package warm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tierset/tierset/warm"
)

// TestInvalidInput checks that every refused argument or option is a
// *ValidationError naming it, matching ErrInvalid, returned before the
// cache is used: the cache here is nil, so any call on it would panic.
func TestInvalidInput(t *testing.T) {
	t.Parallel()
	src := fakeSource{}
	tests := []struct {
		name  string
		field string
		call  func(ctx context.Context) error
	}{
		{"warm negative Batch", "options", func(ctx context.Context) error {
			_, err := warm.Warm(ctx, nil, nil, warm.Options{Batch: -1})
			return err
		}},
		{"warm negative MaxPrune", "options", func(ctx context.Context) error {
			_, err := warm.Warm(ctx, nil, nil, warm.Options{Prune: true, MaxPrune: -1})
			return err
		}},
		{"source nil", "source", func(ctx context.Context) error {
			_, err := warm.FromSource(ctx, nil, nil, warm.Options{})
			return err
		}},
		{"source negative MaxPrune with Prune", "options", func(ctx context.Context) error {
			_, err := warm.FromSource(ctx, nil, src, warm.Options{Prune: true, MaxPrune: -1})
			return err
		}},
		{"source negative Batch", "options", func(ctx context.Context) error {
			_, err := warm.FromSource(ctx, nil, src, warm.Options{Batch: -1})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.call(t.Context())
			var ve *warm.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field || !errors.Is(err, warm.ErrInvalid) || !errors.Is(err, &warm.ValidationError{Field: tt.field}) {
				t.Fatalf("err = %v, want a *ValidationError with Field %q matching ErrInvalid", err, tt.field)
			}
			if ve.Detail == "" {
				t.Errorf("err %v has no Detail", err)
			}
		})
	}
}
