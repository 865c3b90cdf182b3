-- The ledger of money-moving requests: one row per (user, route,
-- Idempotency-Key), the system of record for "did this payment run", and an
-- append-only trail of every HTTP request that touched it.
--
-- The unique constraint is the claim: the first INSERT wins, whatever
-- instance sends it, and no lease can lapse into "run it again".
CREATE TABLE money_requests (
    id              bigserial PRIMARY KEY,
    user_id         text        NOT NULL,
    route           text        NOT NULL,
    idem_key        text        NOT NULL,
    fingerprint     bytea       NOT NULL,  -- SHA-256 of method, path, query and body
    session_ref     text        NOT NULL,  -- a hash of the session id, never the id
    client_ip       text        NOT NULL,
    request_id      text        NOT NULL,  -- X-Request-Id of the request that claimed it
    state           text        NOT NULL CHECK (state IN ('in_flight', 'done', 'released', 'unknown')),
    owner           text        NOT NULL,  -- the claiming request's random fence
    attempts        integer     NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL DEFAULT now(),
    claimed_at      timestamptz NOT NULL DEFAULT now(),
    deadline        timestamptz NOT NULL,  -- after it the owner can no longer reach the upstream
    finished_at     timestamptz,
    ending          text,                  -- how it ended: answered, not_sent, refused, ambiguous, owner_lost, settled
    upstream_status integer,
    payment_id      text,
    response        bytea,                 -- the final answer, sealed (AES-256-GCM), for replay
    CONSTRAINT money_requests_key UNIQUE (user_id, route, idem_key)
);

CREATE INDEX money_requests_open ON money_requests (deadline) WHERE state IN ('in_flight', 'unknown');
CREATE INDEX money_requests_user_recent ON money_requests (user_id, route, created_at);

CREATE TABLE money_request_events (
    id           bigserial PRIMARY KEY,
    money_request bigint     NOT NULL REFERENCES money_requests (id),
    at           timestamptz NOT NULL DEFAULT now(),
    what         text        NOT NULL,
    session_ref  text        NOT NULL,
    client_ip    text        NOT NULL,
    request_id   text        NOT NULL
);

CREATE INDEX money_request_events_request ON money_request_events (money_request);

---- create above / drop below ----

DROP TABLE money_request_events;
DROP TABLE money_requests;
