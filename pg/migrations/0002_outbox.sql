-- The delay-queue outbox: a task is a row written in the caller's own
-- transaction, so it exists exactly when the business change committed.
-- The relay copies 'new' rows to Redis and marks them 'relayed'; the
-- handler marks its row 'done' in the transaction that does the work.
-- Rows in 'new' or 'relayed' are what Source.Pending lists to Reconcile.
CREATE TABLE __schema__.delay_outbox (
    id          bigserial PRIMARY KEY,
    queue       text NOT NULL CHECK (queue <> ''),
    key         text NOT NULL CHECK (key <> ''),
    token       text NOT NULL CHECK (token <> ''),
    payload     bytea NOT NULL DEFAULT '',
    due_at      timestamptz NOT NULL,
    state       text NOT NULL DEFAULT 'new'
                CHECK (state IN ('new', 'relayed', 'done', 'cancelled', 'refused')),
    last_error  text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    relayed_at  timestamptz,
    finished_at timestamptz,
    CONSTRAINT delay_outbox_key_token UNIQUE (queue, key, token)
);

CREATE INDEX delay_outbox_new ON __schema__.delay_outbox (queue, id) WHERE state = 'new';
CREATE INDEX delay_outbox_pending ON __schema__.delay_outbox (queue, id) WHERE state IN ('new', 'relayed');
CREATE INDEX delay_outbox_key ON __schema__.delay_outbox (queue, key) WHERE state IN ('new', 'relayed');
