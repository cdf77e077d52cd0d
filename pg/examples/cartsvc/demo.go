package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/pg"
	"github.com/tierset/tierset/rules"
)

//go:embed demo_rules.json
var demoRules []byte

const (
	demoSchema = "cartsvc_demo"
	demoPrefix = "cartsvc-demo"
)

var demoCarts = []string{
	`{"lines": [{"promotion": "qty-3-5-10", "quantity": 7, "base": "70.00"},
	            {"promotion": "10086", "amount": "219.50", "base": "219.50"}]}`,
	`{"lines": [{"promotion": "qty-3-5-10", "quantity": 2, "base": "20.00"},
	            {"promotion": "every-100-10", "amount": "345.00", "base": "345.00"},
	            {"promotion": "bundle-2-for-30", "quantity": 4, "base": "72.00"}]}`,
	`{"lines": [{"promotion": "qty-3-5-10", "quantity": -1, "base": "10"}]}`,
}

// runDemo seeds its own schema and key prefix, serves on a free loopback
// port, prices demoCarts, changes a promotion in the database to show the
// watcher, and removes what it created.
func runDemo(ctx context.Context, cfg config, out io.Writer) error {
	cfg.schema, cfg.prefix = demoSchema, demoPrefix
	out = &lockedWriter{w: out}
	s, err := open(ctx, cfg, out)
	if err != nil {
		return err
	}
	defer s.close()
	ps, err := rules.Parse(bytes.NewReader(demoRules), "demo_rules.json", rules.Options{})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, p := range ps {
			// Unordered (revision 0): the demo's keys go whatever they hold,
			// and the schema, revisions included, goes with them.
			_, _ = s.cache.Delete(cctx, p.ID, 0)
		}
		_, _ = s.pool.Exec(cctx, `DROP SCHEMA IF EXISTS `+demoSchema+` CASCADE`)
		fmt.Fprintf(out, "\ndemo: dropped schema %s and the %s keys\n", demoSchema, demoPrefix)
	}()
	if _, err := pg.Migrate(ctx, s.pool, demoSchema); err != nil {
		return err
	}
	if err := savePromotions(ctx, s, ps...); err != nil {
		return err
	}
	fmt.Fprintf(out, "demo: seeded %d promotions into %s\n", len(ps), demoSchema)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	done, err := s.start(sctx, l, cfg, out)
	if err != nil {
		return err
	}
	url := "http://" + l.Addr().String() + "/v1/cart/price"
	for _, cart := range demoCarts {
		if err := priceAndShow(ctx, out, url, cart); err != nil {
			return err
		}
	}

	// An operator raises "buy 5" to 25% in the database; the watcher
	// refreshes just that promotion in Redis.
	p := ps[0]
	p.Tiers[1].Reward.Percent = decimal.NewFromInt(25)
	changed := time.Now()
	if err := savePromotions(ctx, s, p); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ndemo: UPDATE in PostgreSQL: %s tier %s is now 25%% off\n", p.ID, p.Tiers[1].ID)
	for {
		body, err := post(ctx, url, demoCarts[0])
		if err != nil {
			return err
		}
		if strings.Contains(body, `"percent":"25"`) {
			fmt.Fprintf(out, "demo: Redis had it %v after the commit\n", time.Since(changed).Round(time.Millisecond))
			break
		}
		if time.Since(changed) > 5*time.Second {
			return errors.New("demo: the change did not reach Redis within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := priceAndShow(ctx, out, url, demoCarts[0]); err != nil {
		return err
	}
	stop()
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func savePromotions(ctx context.Context, s *service, ps ...gradient.Promotion) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, p := range ps {
		if err := s.rules.Save(ctx, tx, p); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

func post(ctx context.Context, url, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b), err
}

func priceAndShow(ctx context.Context, out io.Writer, url, cart string) error {
	body, err := post(ctx, url, cart)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nPOST /v1/cart/price %s\n", strings.Join(strings.Fields(cart), " "))
	status, payload, _ := strings.Cut(body, " ")
	var pretty bytes.Buffer
	if json.Indent(&pretty, []byte(payload), "  ", "  ") != nil {
		pretty.WriteString(payload)
	}
	fmt.Fprintf(out, "→ %s\n  %s", status, pretty.String())
	return nil
}
