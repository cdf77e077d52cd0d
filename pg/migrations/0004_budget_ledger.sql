-- The budget ledger: one row per confirmed order (a redemption), written
-- in the caller's transaction by Ledger.Confirm together with an outbox
-- task that confirms it in Redis. The ledger is the truth; Redis's
-- counters are rebuilt from it (Ledger.Reconcile) after Redis lost data.
-- lines and attributes are as package budget encodes them
-- (budget.Line's JSON: p, u, a); counted_at picks the period of period
-- caps.
CREATE TABLE __schema__.budget_ledger (
    budget     text NOT NULL CHECK (octet_length(budget) BETWEEN 1 AND 128),
    order_id   text NOT NULL CHECK (octet_length(order_id) BETWEEN 1 AND 200),
    attributes jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(attributes) = 'object'),
    lines      jsonb NOT NULL CHECK (jsonb_typeof(lines) = 'array' AND jsonb_array_length(lines) > 0),
    counted_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (budget, order_id)
);
