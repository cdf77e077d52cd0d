-- Promotions, tiers and gifts: the source of truth the warm-up job and
-- Watch load into Redis. Money is NUMERIC (exact), never float. The CHECKs
-- refuse what gradient.Validate refuses where a row alone can tell;
-- Rules.Load still validates every promotion and skips the ones gradient
-- refuses (for example an amount finer than minor_digits).

CREATE TABLE __schema__.promotions (
    id           text PRIMARY KEY
                 CHECK (octet_length(id) BETWEEN 1 AND 128 AND id !~ '[{}[:space:][:cntrl:]]'),
    metric       text NOT NULL CHECK (metric IN ('quantity', 'amount')),
    minor_digits integer NOT NULL DEFAULT 2 CHECK (minor_digits BETWEEN 0 AND 9),
    kind         text NOT NULL DEFAULT 'threshold'
                 CHECK (kind IN ('threshold', 'parity_price', 'parity_discount')),
    starts_at    timestamptz,
    ends_at      timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT promotions_window CHECK (starts_at IS NULL OR ends_at IS NULL OR ends_at > starts_at)
);

CREATE TABLE __schema__.tiers (
    promotion_id text NOT NULL REFERENCES __schema__.promotions (id) ON DELETE CASCADE ON UPDATE CASCADE,
    tier_id      text NOT NULL
                 CHECK (octet_length(tier_id) BETWEEN 1 AND 128 AND tier_id !~ '[{}[:space:][:cntrl:]]'),
    position     integer NOT NULL,
    threshold    numeric CHECK (threshold > 0),
    match_value  numeric CHECK (match_value > 0),
    reward_kind  text NOT NULL CHECK (reward_kind IN ('percent_off', 'amount_off', 'fixed_price', 'every_n')),
    percent      numeric NOT NULL DEFAULT 0 CHECK (percent >= 0 AND percent <= 100),
    amount       numeric NOT NULL DEFAULT 0 CHECK (amount >= 0),
    step         numeric NOT NULL DEFAULT 0 CHECK (step >= 0),
    cap          numeric NOT NULL DEFAULT 0 CHECK (cap >= 0),
    PRIMARY KEY (promotion_id, tier_id),
    CONSTRAINT tiers_position UNIQUE (promotion_id, position),
    -- NUMERIC equality ignores trailing zeros (5 = 5.00), so these refuse
    -- duplicate thresholds however they are written.
    CONSTRAINT tiers_threshold_unique UNIQUE (promotion_id, threshold),
    CONSTRAINT tiers_match_value_unique UNIQUE (promotion_id, match_value),
    CONSTRAINT tiers_match CHECK (threshold IS NOT NULL OR match_value IS NOT NULL)
);

CREATE TABLE __schema__.gifts (
    promotion_id text NOT NULL,
    tier_id      text NOT NULL,
    position     integer NOT NULL,
    sku          text NOT NULL
                 CHECK (octet_length(sku) BETWEEN 1 AND 128 AND sku !~ '[{}[:space:][:cntrl:]]'),
    qty          integer NOT NULL CHECK (qty BETWEEN 1 AND 1000),
    name         text NOT NULL DEFAULT '' CHECK (octet_length(name) <= 256),
    PRIMARY KEY (promotion_id, tier_id, position),
    FOREIGN KEY (promotion_id, tier_id) REFERENCES __schema__.tiers (promotion_id, tier_id)
        ON DELETE CASCADE ON UPDATE CASCADE
);

-- Every committed change to a promotion, its tiers or its gifts notifies
-- the channel tierset_rules with {"schema": ..., "id": ...}. Notifications
-- are sent at commit, and identical ones within a transaction are sent
-- once, so rewriting 100 tiers of a promotion is one notification.
CREATE FUNCTION __schema__.notify_rules() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    col text := TG_ARGV[0];
    old_id text;
    new_id text;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        old_id := to_jsonb(OLD) ->> col;
        PERFORM pg_notify('tierset_rules', json_build_object('schema', TG_TABLE_SCHEMA, 'id', old_id)::text);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        new_id := to_jsonb(NEW) ->> col;
        IF new_id IS DISTINCT FROM old_id THEN
            PERFORM pg_notify('tierset_rules', json_build_object('schema', TG_TABLE_SCHEMA, 'id', new_id)::text);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER promotions_notify AFTER INSERT OR UPDATE OR DELETE ON __schema__.promotions
    FOR EACH ROW EXECUTE FUNCTION __schema__.notify_rules('id');
CREATE TRIGGER tiers_notify AFTER INSERT OR UPDATE OR DELETE ON __schema__.tiers
    FOR EACH ROW EXECUTE FUNCTION __schema__.notify_rules('promotion_id');
CREATE TRIGGER gifts_notify AFTER INSERT OR UPDATE OR DELETE ON __schema__.gifts
    FOR EACH ROW EXECUTE FUNCTION __schema__.notify_rules('promotion_id');
