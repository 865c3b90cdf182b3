-- What sound settlement needs (docs/payments.md, "Settling"):
--
-- sending_at is the durable mark that the owner is about to send the request
-- upstream, written before the send and fenced by the claim: a row past its
-- deadline whose mark is NULL provably never left the BFF, so its key is
-- given back instead of being called unknown. sends counts the marks.
--
-- content (sealed, written with the claim) is what settling compares of a
-- payment: its paymentInformation and redirectUrl; settling weighs every
-- open request's content against a candidate payment. snapshot says the
-- owner read the user's payments just before the send: seen_before are the
-- ids of those with this content (they are never this request's), seen_from
-- and seen_cut bound that snapshot on the upstream's clock, and window_end
-- is the latest upstream time at which this request could still have made a
-- payment (from the upstream's Date header against the owner's clock).
--
-- settle_next is when the background settler may look at an open row again
-- (its lease, so one instance at a time does); settle_tries counts looks.
ALTER TABLE money_requests
    ADD COLUMN sending_at   timestamptz,
    ADD COLUMN sends        integer NOT NULL DEFAULT 0,
    ADD COLUMN content      bytea,
    ADD COLUMN snapshot     boolean NOT NULL DEFAULT false,
    ADD COLUMN seen_before  text[],
    ADD COLUMN seen_from    timestamptz,
    ADD COLUMN seen_cut     timestamptz,
    ADD COLUMN window_end   timestamptz,
    ADD COLUMN settle_next  timestamptz,
    ADD COLUMN settle_tries integer NOT NULL DEFAULT 0;

-- Which of the user's rows owns a listed payment, on any route.
CREATE INDEX money_requests_payment ON money_requests (user_id, payment_id) WHERE payment_id IS NOT NULL;

---- create above / drop below ----

DROP INDEX money_requests_payment;
ALTER TABLE money_requests
    DROP COLUMN sending_at, DROP COLUMN sends, DROP COLUMN content, DROP COLUMN snapshot, DROP COLUMN seen_before,
    DROP COLUMN seen_from, DROP COLUMN seen_cut, DROP COLUMN window_end,
    DROP COLUMN settle_next, DROP COLUMN settle_tries;
