-- Payments the user approves (docs/payments.md, "Payments the user
-- approves"): a money request that needs the user's step-up approval is
-- claimed in state awaiting_approval and not sent. held is the request to
-- send once approved (path, query and body), sealed like content; deadline
-- is when the hold expires. An approved hold becomes in_flight under a new
-- owner and runs the money path; a hold never approved ends declined (its
-- ending says why: denied, mismatch, expired), and is never sent.
--
-- Both new states are streamed to the user's apps, like done and unknown.

ALTER TABLE money_requests DROP CONSTRAINT money_requests_state_check;
ALTER TABLE money_requests ADD CONSTRAINT money_requests_state_check
    CHECK (state IN ('in_flight', 'done', 'released', 'unknown', 'awaiting_approval', 'declined'));
ALTER TABLE money_requests ADD COLUMN held bytea;
CREATE INDEX money_requests_holds ON money_requests (deadline) WHERE state = 'awaiting_approval';

CREATE OR REPLACE FUNCTION money_request_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('done', 'unknown', 'awaiting_approval', 'declined') AND (TG_OP = 'INSERT'
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

---- create above / drop below ----

CREATE OR REPLACE FUNCTION money_request_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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
DROP INDEX money_requests_holds;
ALTER TABLE money_requests DROP COLUMN held;
ALTER TABLE money_requests DROP CONSTRAINT money_requests_state_check;
ALTER TABLE money_requests ADD CONSTRAINT money_requests_state_check
    CHECK (state IN ('in_flight', 'done', 'released', 'unknown'));
