-- What GET /bff/payments and GET /bff/payments/{key} read (docs/endpoints.md):
-- a user's records newest first, paged by (created_at, id), and one of them
-- by its Idempotency-Key on any route. money_requests_user_recent leads with
-- the route, so it serves neither across routes.
--
-- Built inside the migration's transaction, which holds writes to the
-- table for as long as the build takes: seconds for a ledger of millions
-- of rows (measure on a copy before a large upgrade).
CREATE INDEX money_requests_user_list ON money_requests (user_id, created_at DESC, id DESC);
CREATE INDEX money_requests_user_key ON money_requests (user_id, idem_key);

---- create above / drop below ----

DROP INDEX money_requests_user_key;
DROP INDEX money_requests_user_list;
