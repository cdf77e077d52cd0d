-- Revisions order the writers of Redis: every committed change to a
-- promotion, its tiers or its gifts gives the promotion a new revision in
-- the same transaction, and every deletion leaves a tombstone carrying a
-- revision of its own. Revisions come from one sequence, so they grow
-- across a delete and a re-create of the same ID; a writer holding an
-- older revision than Redis changes nothing there.
--
-- Revisions are taken while the promotion's row is locked (a BEFORE
-- UPDATE or DELETE trigger runs after the row lock is granted), so of two
-- transactions changing one promotion the one that commits later has the
-- higher revision. An INSERT is given its revision by an UPDATE of the
-- new row in an AFTER trigger, which runs after any wait on a concurrent
-- delete of the same ID; a BEFORE INSERT trigger could take its revision
-- before that wait and end below the deletion's tombstone.

CREATE SEQUENCE __schema__.promotion_revision AS bigint;

ALTER TABLE __schema__.promotions ADD COLUMN revision bigint;
-- An existing table migrates in place: each promotion gets a revision now.
UPDATE __schema__.promotions SET revision = nextval('__schema__.promotion_revision');
ALTER TABLE __schema__.promotions
    ALTER COLUMN revision SET DEFAULT nextval('__schema__.promotion_revision'),
    ALTER COLUMN revision SET NOT NULL;

-- One row per deleted promotion ID: the revision of its deletion. A
-- re-created promotion removes its tombstone. Rules.PurgeTombstones
-- deletes old ones (Watch does it on each full pass; see KeepTombstones).
CREATE TABLE __schema__.promotion_tombstones (
    id         text PRIMARY KEY,
    revision   bigint NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX promotion_tombstones_deleted_at ON __schema__.promotion_tombstones (deleted_at);

CREATE FUNCTION __schema__.promotion_revise() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR OLD.id IS DISTINCT FROM NEW.id THEN
        INSERT INTO __schema__.promotion_tombstones (id, revision)
            VALUES (OLD.id, nextval('__schema__.promotion_revision'))
            ON CONFLICT (id) DO UPDATE SET revision = EXCLUDED.revision, deleted_at = now();
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    IF OLD.id IS DISTINCT FROM NEW.id THEN
        -- A rename is a delete of the old ID and a create of the new one.
        DELETE FROM __schema__.promotion_tombstones WHERE id = NEW.id;
    END IF;
    NEW.revision := nextval('__schema__.promotion_revision');
    RETURN NEW;
END
$$;

CREATE FUNCTION __schema__.promotion_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM __schema__.promotion_tombstones WHERE id = NEW.id;
    -- Fires promotions_revise: a revision taken after the row is in.
    UPDATE __schema__.promotions SET revision = 0 WHERE id = NEW.id;
    RETURN NULL;
END
$$;

-- A change to a tier or a gift revises its promotion once per
-- transaction: a promotion row this transaction already wrote (xmin) has
-- its revision, taken under the row lock this transaction holds until it
-- commits. Nothing happens when the promotion itself is being deleted
-- (its tombstone has the revision).
CREATE FUNCTION __schema__.promotion_child_revise() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_id text;
    new_id text;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        old_id := OLD.promotion_id;
        UPDATE __schema__.promotions SET revision = 0 WHERE id = old_id AND xmin <> pg_current_xact_id()::xid;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        new_id := NEW.promotion_id;
        IF new_id IS DISTINCT FROM old_id THEN
            UPDATE __schema__.promotions SET revision = 0 WHERE id = new_id AND xmin <> pg_current_xact_id()::xid;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER promotions_revise BEFORE UPDATE OR DELETE ON __schema__.promotions
    FOR EACH ROW EXECUTE FUNCTION __schema__.promotion_revise();
CREATE TRIGGER promotions_created AFTER INSERT ON __schema__.promotions
    FOR EACH ROW EXECUTE FUNCTION __schema__.promotion_created();
CREATE TRIGGER tiers_revise AFTER INSERT OR UPDATE OR DELETE ON __schema__.tiers
    FOR EACH ROW EXECUTE FUNCTION __schema__.promotion_child_revise();
CREATE TRIGGER gifts_revise AFTER INSERT OR UPDATE OR DELETE ON __schema__.gifts
    FOR EACH ROW EXECUTE FUNCTION __schema__.promotion_child_revise();
