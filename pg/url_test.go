package pg

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"postgres://app:s3cret@db:5432/shop", "postgres://app:xxxxx@db:5432/shop"},
		{"postgresql://db/shop?password=s3cret&sslmode=require", "postgresql://db/shop?password=xxxxx&sslmode=require"},
		{"host=db user=app password=s3cret dbname=shop", "host=db user=app password=xxxxx dbname=shop"},
		{"host=db password='s3 cret' dbname=shop", "host=db password=xxxxx dbname=shop"},
	}
	for _, tt := range tests {
		got := RedactURL(tt.in)
		if got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "s3 cret") {
			t.Errorf("RedactURL(%q) leaks the password: %q", tt.in, got)
		}
	}
}
