-- Payments followed after their answer, and their changes streamed to the
-- user's apps (GET /bff/events; docs/payments.md, "Following a payment's
-- status").
--
-- payment_status is the upstream's latest known status of the row's
-- payment, status_at the upstream's updatedAt of it: a status is stored only
-- when it is not older than the one kept, whichever of a poll and a webhook
-- brings it first.
--
-- change_seq is the row's position in its user's stream of changes: a
-- trigger takes the next one of the user's counter (money_request_positions)
-- whenever a listed field of a row that is done or unknown changes
-- (released and in-flight rows are not streamed), and tells every instance
-- with pg_notify, after the commit. A trigger, so that every writer (this
-- version's, an earlier one's during a rolling upgrade, an operator's
-- UPDATE) moves the stream. A counter row per user, not a sequence: its row
-- lock, held to the commit, makes a user's positions commit in their order,
-- so a reader that has seen position n has seen every position below it
-- (with a sequence, a transaction holding 3 could commit after one holding
-- 4 was read, and 3 would never be streamed).
--
-- watch_next is when the row's payment is polled next (NULL: not
-- followed); watch_owner the random fence of the instance that leased the
-- poll: its write is refused once another has taken the lease; watch_wait_ms
-- the current wait between polls. The trigger starts following a payment
-- when its row becomes done with a payment id.
--
-- webhook_deliveries are the webhook-ids received lately: a replay within
-- the signature's window is refused.
CREATE TABLE money_request_positions (
    user_id text PRIMARY KEY,
    seq     bigint NOT NULL
);

ALTER TABLE money_requests
    ADD COLUMN payment_status text,
    ADD COLUMN status_at      timestamptz,
    ADD COLUMN change_seq     bigint,
    ADD COLUMN watch_next     timestamptz,
    ADD COLUMN watch_owner    text,
    ADD COLUMN watch_wait_ms  integer;

CREATE INDEX money_requests_changes ON money_requests (user_id, change_seq) WHERE change_seq IS NOT NULL;
CREATE INDEX money_requests_watch ON money_requests (watch_next) WHERE watch_next IS NOT NULL;
CREATE INDEX money_requests_payment_any ON money_requests (payment_id) WHERE payment_id IS NOT NULL;

CREATE TABLE webhook_deliveries (
    id          text PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_received ON webhook_deliveries (received_at);

CREATE FUNCTION money_request_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('done', 'unknown') AND (TG_OP = 'INSERT'
        OR OLD.state IS DISTINCT FROM NEW.state
        OR OLD.payment_id IS DISTINCT FROM NEW.payment_id
        OR OLD.payment_status IS DISTINCT FROM NEW.payment_status
        OR OLD.response IS DISTINCT FROM NEW.response) THEN
        INSERT INTO money_request_positions AS p (user_id, seq) VALUES (NEW.user_id, 1)
            ON CONFLICT (user_id) DO UPDATE SET seq = p.seq + 1
            RETURNING p.seq INTO NEW.change_seq;
        PERFORM pg_notify('money_request_changes', NEW.user_id);
    END IF;
    IF NEW.state = 'done' AND NEW.payment_id IS NOT NULL AND NEW.watch_next IS NULL
        AND (TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM 'done' OR OLD.payment_id IS DISTINCT FROM NEW.payment_id)
        AND coalesce(NEW.payment_status, '') NOT IN ('ACSC', 'ACCC', 'RJCT', 'CANC', 'ERROR') THEN
        NEW.watch_next := now();
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER money_request_changed BEFORE INSERT OR UPDATE ON money_requests
    FOR EACH ROW EXECUTE FUNCTION money_request_changed();

---- create above / drop below ----

DROP TRIGGER money_request_changed ON money_requests;
DROP FUNCTION money_request_changed();
DROP TABLE webhook_deliveries;
DROP INDEX money_requests_payment_any;
DROP INDEX money_requests_watch;
DROP INDEX money_requests_changes;
ALTER TABLE money_requests
    DROP COLUMN payment_status, DROP COLUMN status_at, DROP COLUMN change_seq,
    DROP COLUMN watch_next, DROP COLUMN watch_owner, DROP COLUMN watch_wait_ms;
DROP TABLE money_request_positions;
